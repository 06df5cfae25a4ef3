/// A place in an ordered queue (``Effect/queued(id:)``).
struct QueueTicket: Sendable {
  let key: CancelKey
  let number: UInt64
}

/// One ordered queue: places are served in the order they were taken.
struct SerialQueue<Waiter> {
  /// The number the next place gets.
  var nextTicket: UInt64 = 0
  /// The place whose turn it is.
  var serving: UInt64 = 0
  /// Places left out of turn (given up before their turn), skipped when their turn comes.
  var released: Set<UInt64> = []
  /// Places waiting for their turn.
  var waiters: [UInt64: Waiter] = [:]
}
extension SerialQueue: Sendable where Waiter: Sendable {}

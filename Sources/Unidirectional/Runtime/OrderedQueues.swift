/// A place in an ordered queue (``Effect/queued(id:)``).
struct QueueTicket: Sendable {
  let key: CancelKey
  let number: UInt64
}

/// The ordered queues of one store (``Effect/queued(id:)``), as a value: places are served in
/// the order they were taken, and a queue nobody holds a place in is forgotten.
///
/// Its transitions return the waiter to resume; the caller resumes it after the lock.
struct OrderedQueues<Waiter> {
  fileprivate struct Queue {
    /// The number the next place gets.
    var nextTicket: UInt64 = 1
    /// The place whose turn it is.
    var serving: UInt64 = 0
    /// Places left out of turn (given up before their turn), skipped when their turn comes.
    var released: Set<UInt64> = []
    /// Places waiting for their turn.
    var waiters: [UInt64: Waiter] = [:]
  }

  private var queues: [CancelKey: Queue] = [:]

  /// Queues with a place taken and not yet left.
  var count: Int { self.queues.count }

  /// Takes the next place in the queue `key`: its turn comes when every place taken before it has
  /// been left.
  mutating func enqueue(on key: CancelKey) -> QueueTicket {
    guard let index = self.queues.index(forKey: key) else {
      self.queues[key] = Queue()
      return QueueTicket(key: key, number: 0)
    }
    defer { self.queues.values[index].nextTicket += 1 }
    return QueueTicket(key: key, number: self.queues.values[index].nextTicket)
  }

  /// Waits for `ticket`'s turn; returns the waiter when it is its turn already.
  mutating func waitForTurn(_ ticket: QueueTicket, _ waiter: Waiter) -> Waiter? {
    guard let index = self.queues.index(forKey: ticket.key),
      self.queues.values[index].serving != ticket.number
    else { return waiter }
    precondition(
      ticket.number < self.queues.values[index].nextTicket,
      "A queue place waited for that was never taken."
    )
    let previous = self.queues.values[index].waiters.updateValue(waiter, forKey: ticket.number)
    precondition(previous == nil, "A queue place waited for twice.")
    return nil
  }

  /// Leaves the queue: `ticket`'s turn has ended, or it gives up its place before its turn (a job
  /// abandoned at shutdown).
  ///
  /// Returns the waiter whose turn it now is.
  mutating func leave(_ ticket: QueueTicket) -> Waiter? {
    guard let index = self.queues.index(forKey: ticket.key) else { return nil }
    self.queues.values[index].released.insert(ticket.number)
    while self.queues.values[index].released.remove(self.queues.values[index].serving) != nil {
      self.queues.values[index].serving += 1
    }
    let serving = self.queues.values[index].serving
    if serving == self.queues.values[index].nextTicket {
      self.queues.remove(at: index)
      return nil
    }
    return self.queues.values[index].waiters.removeValue(forKey: serving)
  }
}

extension OrderedQueues: Sendable where Waiter: Sendable {}
extension OrderedQueues.Queue: Sendable where Waiter: Sendable {}

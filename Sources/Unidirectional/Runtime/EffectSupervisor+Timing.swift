/// Debounce timers, throttles and ordered queues: each a value of its own, guarded by the
/// supervisor's lock with the rest of the store's effect state.
extension EffectSupervisor {
  /// Re-arms the sleeping timer of `key`; `false` if there is none.
  @usableFromInline
  func rearmDebounce(_ key: CancelKey, deadline: any Sendable, body: any Sendable) -> Bool {
    self.guarded.withLock { $0.machine.rearmDebounce(key, deadline: deadline, body: body) }
  }

  /// Cancels what runs under `key` (a fired timer's body), then records a new timer.
  func armDebounce(_ key: CancelKey, deadline: any Sendable, body: any Sendable) -> UInt64 {
    let (cancellation, generation) = self.guarded.withLock { guarded in
      let cancellation = guarded.machine.cancel([key])
      return (cancellation, guarded.machine.debounces.arm(key, deadline: deadline, body: body))
    }
    self.perform(cancellation)
    return generation
  }

  func wakeDebounce(
    _ key: CancelKey,
    generation: UInt64,
    sleptUntil isSameDeadline: (any Sendable) -> Bool
  ) -> DebounceTimers.Wake {
    self.guarded.withLock {
      $0.machine.debounces.wake(key, generation: generation, sleptUntil: isSameDeadline)
    }
  }

  func endDebounce(_ key: CancelKey, generation: UInt64) {
    self.guarded.withLock { $0.machine.debounces.end(key, generation: generation) }
  }

  /// Ids with a debounce timer, and ids with throttle state.
  var timingStateCounts: (debounces: Int, throttles: Int) {
    self.guarded.withLock { ($0.machine.debounces.count, $0.machine.throttles.count) }
  }

  /// Takes the next place in the queue `key` (on the store, in the order effects were returned).
  @inline(never)
  func enqueue(on key: CancelKey) -> QueueTicket {
    self.guarded.withLock { $0.machine.queues.enqueue(on: key) }
  }

  /// Suspends until every place taken before `ticket` has been left.
  func waitForTurn(_ ticket: QueueTicket) async {
    await withUnsafeContinuation { continuation in
      self.guarded.withLock { $0.machine.queues.waitForTurn(ticket, continuation) }?.resume()
    }
  }

  /// Leaves the queue, starting the next place's turn.
  @inline(never)
  func leaveQueue(_ ticket: QueueTicket) {
    self.guarded.withLock { $0.machine.queues.leave(ticket) }?.resume()
  }

  /// Queues with a place taken and not yet left.
  var queueCount: Int {
    self.guarded.withLock { $0.machine.queues.count }
  }

  /// Reads and updates the throttle state of `key` (see `Effect.throttle`).
  func withThrottleState<R: Sendable>(for key: CancelKey, _ body: (inout ThrottleState) -> R) -> R {
    self.guarded.withLock { $0.machine.throttles.withState(for: key, body) }
  }
}

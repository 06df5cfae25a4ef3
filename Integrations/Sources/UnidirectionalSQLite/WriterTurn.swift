import Synchronization

/// Whose turn it is to take and write a batch: one save at a time, in arrival order.
///
/// A save holds the turn from taking its batch until its transaction starts to commit. The next
/// save then takes its batch and encodes it while that commit waits for the disk, so SQLite's one
/// writer spends its time on statements and commits, and a batch holds every state that arrived
/// before the write ahead of it finished its statements.
final class WriterTurn: Sendable {
  private struct Turns {
    var held = false
    var waiting: [CheckedContinuation<Void, Never>] = []
    /// Tests waiting for this many saves to wait for the turn.
    var watchers: [(Int, CheckedContinuation<Void, Never>)] = []
  }

  private let turns = Mutex(Turns())

  /// The turn as one save holds it: released once, however many of its paths release it (the
  /// commit that passes it on early, and the exit that passes it on if nothing did).
  final class Hold: Sendable {
    private let turn: WriterTurn
    private let released = Atomic(false)

    fileprivate init(_ turn: WriterTurn) { self.turn = turn }

    /// Passes the turn on, the first time.
    func release() {
      guard !self.released.exchange(true, ordering: .acquiringAndReleasing) else { return }
      self.turn.passOn()
    }
  }

  /// Returns once the turn is the caller's.
  func acquire() async -> Hold {
    await self.wait()
    return Hold(self)
  }

  private func wait() async {
    await withCheckedContinuation { (waiter: CheckedContinuation<Void, Never>) in
      let (now, watchers) = self.turns.withLock { turns in
        guard turns.held else {
          turns.held = true
          return (true, [CheckedContinuation<Void, Never>]())
        }
        turns.waiting.append(waiter)
        let count = turns.waiting.count
        var ready: [CheckedContinuation<Void, Never>] = []
        turns.watchers.removeAll { wanted, watcher in
          guard count >= wanted else { return false }
          ready.append(watcher)
          return true
        }
        return (false, ready)
      }
      if now { waiter.resume() }
      for watcher in watchers { watcher.resume() }
    }
  }

  /// Returns once `count` saves wait for the turn (tests of its order).
  func waitUntilWaiting(_ count: Int) async {
    await withCheckedContinuation { (watcher: CheckedContinuation<Void, Never>) in
      let ready = self.turns.withLock { turns in
        guard turns.waiting.count < count else { return true }
        turns.watchers.append((count, watcher))
        return false
      }
      if ready { watcher.resume() }
    }
  }

  /// Passes the turn to the first save waiting for it, or frees it.
  private func passOn() {
    let next = self.turns.withLock { turns -> CheckedContinuation<Void, Never>? in
      precondition(turns.held, "A save released a writer turn it did not hold.")
      guard !turns.waiting.isEmpty else {
        turns.held = false
        return nil
      }
      return turns.waiting.removeFirst()
    }
    next?.resume()
  }
}

/// Saves sessions' states in batches: every state waiting while a save is in flight goes into the
/// next one, one storage call for all of them (group commit).
///
/// Each key's newest state wins: a batch carries the state with the highest version (the number
/// of actions the store had reduced), and a waiter is done once a version at least as new as its
/// own is saved. A state older than one already saved or in flight is never written over it.
final class GroupCommit<Key: Hashable & Sendable, State: Sendable>: Sendable {
  typealias Waiter = CheckedContinuation<Void, any Error>

  private struct Pending: Sendable {
    var state: State
    var version: UInt64
    var token: UInt64
    var waiters: [Waiter]
  }

  private struct InFlight: Sendable {
    var version: UInt64
    var waiters: [Waiter]
  }

  private struct Queue: Sendable {
    var pending: [Key: Pending] = [:]
    var inFlight: [Key: InFlight] = [:]
    /// The newest version saved per key, while the key is live.
    var saved: [Key: UInt64] = [:]
    /// Saves in flight (at most `maximumFlushes`), each with its own batch.
    var flushes = 0
    /// Tests waiting for this many states to be queued behind the save in flight.
    var queuedWaiters: [(Int, CheckedContinuation<Void, Never>)] = []

    /// Sends waiting for the next batch.
    var queuedSends: Int {
      self.pending.values.reduce(0) { $0 + $1.waiters.count }
    }

    mutating func takeReadyQueuedWaiters() -> [CheckedContinuation<Void, Never>] {
      guard !self.queuedWaiters.isEmpty else { return [] }
      let queued = self.queuedSends
      var ready: [CheckedContinuation<Void, Never>] = []
      self.queuedWaiters.removeAll { count, waiter in
        guard queued >= count else { return false }
        ready.append(waiter)
        return true
      }
      return ready
    }
  }

  private let storage: any SessionStorage<Key, State>
  private let owner: String
  /// Told when a save was refused for a stale token: the key's lease is someone else's.
  private let ownershipLost: @Sendable (Key, UInt64, String?) -> Void
  private let queue = LockedBox(Queue())
  /// How many saves may be in flight at once (``SessionStorage/concurrentSaves``).
  ///
  /// NB: a key is in at most one of them: two saves of one key in flight could commit out of
  /// order, an older state over a newer one.
  private let maximumFlushes: Int

  init(
    storage: any SessionStorage<Key, State>,
    owner: String,
    ownershipLost: @escaping @Sendable (Key, UInt64, String?) -> Void
  ) {
    self.storage = storage
    self.owner = owner
    self.ownershipLost = ownershipLost
    self.maximumFlushes = max(1, storage.concurrentSaves)
  }

  /// Returns once `state` (version `version` of `key`), or a newer one, is saved.
  func commit(_ key: Key, state: State, version: UInt64, token: UInt64) async throws {
    try await withCheckedThrowingContinuation { (waiter: Waiter) in
      let next = self.queue.withLock { queue -> CommitStep in
        if let saved = queue.saved[key], saved >= version { return .done }
        if var flight = queue.inFlight[key], flight.version >= version {
          flight.waiters.append(waiter)
          queue.inFlight[key] = flight
          return .wait([])
        }
        if var pending = queue.pending[key] {
          if version > pending.version {
            pending.state = state
            pending.version = version
            pending.token = token
          }
          pending.waiters.append(waiter)
          queue.pending[key] = pending
        } else {
          queue.pending[key] = Pending(
            state: state,
            version: version,
            token: token,
            waiters: [waiter]
          )
        }
        let ready = queue.takeReadyQueuedWaiters()
        guard queue.flushes < self.maximumFlushes, queue.inFlight[key] == nil else {
          return .wait(ready)
        }
        queue.flushes += 1
        return .flush(ready)
      }
      switch next {
      case .done: waiter.resume()
      case .wait(let ready):
        for waiter in ready { waiter.resume() }
      case .flush(let ready):
        for waiter in ready { waiter.resume() }
        Task { await self.flush() }
      }
    }
  }

  /// Suspends until `count` sends wait in the queue for the next batch (tests of batching).
  func waitUntilQueued(_ count: Int) async {
    await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
      let ready = self.queue.withLock { queue -> Bool in
        if queue.queuedSends >= count { return true }
        queue.queuedWaiters.append((count, continuation))
        return false
      }
      if ready { continuation.resume() }
    }
  }

  /// Forgets what was saved for `key` (it was passivated: a later activation counts anew).
  func forget(_ key: Key) {
    self.queue.withLock { _ = $0.saved.removeValue(forKey: key) }
  }

  /// Saves batches until nothing it may take waits.
  private func flush() async {
    while true {
      let batch = self.queue.withLock { queue -> [(Key, Pending)]? in
        let batch = queue.pending.filter { queue.inFlight[$0.key] == nil }
        guard !batch.isEmpty else {
          queue.flushes -= 1
          return nil
        }
        for (key, pending) in batch {
          queue.pending.removeValue(forKey: key)
          queue.inFlight[key] = InFlight(version: pending.version, waiters: pending.waiters)
        }
        return Array(batch)
      }
      guard let batch else { return }
      let writes = batch.map { SessionWrite(key: $0.0, state: $0.1.state, token: $0.1.token) }
      let outcome: Result<[SessionSaveResult], any Error>
      do {
        let results = try await self.storage.save(writes, owner: self.owner)
        outcome =
          results.count == writes.count
          ? .success(results)
          : .failure(BatchMismatch(writes: writes.count, results: results.count))
      } catch {
        outcome = .failure(error)
      }
      self.finish(batch, outcome)
    }
  }

  private func finish(_ batch: [(Key, Pending)], _ outcome: Result<[SessionSaveResult], any Error>)
  {
    var resumptions: [(Waiter, SessionError?)] = []
    var lost: [(Key, UInt64, String?)] = []
    self.queue.withLock { queue in
      for (index, (key, pending)) in batch.enumerated() {
        let waiters = queue.inFlight.removeValue(forKey: key)?.waiters ?? pending.waiters
        let failure: SessionError?
        switch outcome {
        case .success(let results):
          switch results[index] {
          case .saved:
            queue.saved[key] = max(queue.saved[key] ?? 0, pending.version)
            failure = nil
          case .staleToken(let owner):
            lost.append((key, pending.token, owner))
            failure = .ownershipLost(
              key: "\(key)",
              message: """
                the save was refused: \(owner.map { "'\($0)'" } ?? "another owner") holds the \
                session's lease now (this instance's lease expired or was taken over); send to \
                the owner, or retry once its lease has expired
                """
            )
          }
        case .failure(let error):
          failure = .storageFailed(
            key: "\(key)",
            message: "saving the session failed: \(error) (\(type(of: error)))"
          )
        }
        for waiter in waiters { resumptions.append((waiter, failure)) }
      }
    }
    for (key, token, owner) in lost { self.ownershipLost(key, token, owner) }
    for (waiter, failure) in resumptions {
      if let failure { waiter.resume(throwing: failure) } else { waiter.resume() }
    }
  }

  /// A backend returned a different number of results than writes.
  struct BatchMismatch: Error, CustomStringConvertible {
    let writes: Int
    let results: Int
    var description: String {
      "the storage answered \(self.results) results for a batch of \(self.writes) writes"
    }
  }
}

/// What a commit does after queuing its state (and the tests' waiters to resume).
private enum CommitStep {
  case done
  case wait([CheckedContinuation<Void, Never>])
  case flush([CheckedContinuation<Void, Never>])
}

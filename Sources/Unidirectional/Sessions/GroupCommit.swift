/// Saves sessions' states in batches: every state waiting while a save is in flight goes into the
/// next one, one storage call for all of them (group commit).
///
/// Each key's newest state wins: a batch carries the state with the highest version (the number
/// of actions the store had reduced), and a waiter is done once a version at least as new as its
/// own is saved. A state older than one already saved or in flight is never written over it.
///
/// A key whose save fails (refused on its own, or with its whole batch) fails that save's waiters
/// and every state of it queued behind, and takes no more states under that lease until the
/// registry ``forget(_:)``s it: the registry discards that store, so no later state of it (which
/// includes what storage refused) is ever written. Other keys of the batch are unaffected.
final class GroupCommit<Key: Hashable & Sendable, State: Sendable>: Sendable {
  typealias Waiter = CheckedContinuation<Void, any Error>

  private struct Pending: Sendable {
    var state: State
    var version: UInt64
    var token: UInt64
    var idempotency: (record: IdempotencyRecord, version: UInt64)
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
    /// The version of each live key's idempotency window last written (none: as loaded).
    var savedWindows: [Key: UInt64] = [:]
    /// Keys whose save failed, with the lease's token and why: later states are refused.
    var failed: [Key: (token: UInt64, failure: SessionError)] = [:]
    /// Saves in flight (at most `maximumFlushes`), each with its own batch.
    var flushes = 0
    /// Tests waiting for this many states to be queued behind the save in flight.
    var queuedWaiters: [(Int, CheckedContinuation<Void, Never>)] = []
    /// What the saves so far carried.
    var statistics = SaveStatistics()

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
  /// Told when a key's save failed, so the registry discards that key's store.
  ///
  /// Its lease is someone else's (a stale token), or the storage refused or failed it.
  private let saveFailed: @Sendable (Key, UInt64, SaveFailure) -> Void
  private let queue = LockedBox(Queue())
  private let observer: (any SessionRegistryObserver)?
  /// How many saves may be in flight at once (``SessionStorage/concurrentSaves``).
  ///
  /// NB: a key is in at most one of them: two saves of one key in flight could commit out of
  /// order, an older state over a newer one.
  private let maximumFlushes: Int

  init(
    storage: any SessionStorage<Key, State>,
    owner: String,
    observer: (any SessionRegistryObserver)? = nil,
    saveFailed: @escaping @Sendable (Key, UInt64, SaveFailure) -> Void
  ) {
    self.storage = storage
    self.owner = owner
    self.observer = observer
    self.saveFailed = saveFailed
    self.maximumFlushes = max(1, storage.concurrentSaves)
  }

  /// Returns once `state` (version `version` of `key`, with the idempotency window it includes),
  /// or a newer one, is saved.
  func commit(
    _ key: Key,
    state: State,
    version: UInt64,
    token: UInt64,
    idempotency: (record: IdempotencyRecord, version: UInt64)
  ) async throws {
    try await withCheckedThrowingContinuation { (waiter: Waiter) in
      let next = self.queue.withLock { queue -> CommitStep in
        if let failed = queue.failed[key], failed.token == token { return .fail(failed.failure) }
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
            pending.idempotency = idempotency
          }
          pending.waiters.append(waiter)
          queue.pending[key] = pending
        } else {
          queue.pending[key] = Pending(
            state: state,
            version: version,
            token: token,
            idempotency: idempotency,
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
      case .fail(let failure): waiter.resume(throwing: failure)
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

  /// What the saves so far carried.
  var statistics: SaveStatistics {
    self.queue.withLock { $0.statistics }
  }

  /// Forgets what was saved or failed for `key` (its store is gone: a later activation counts
  /// anew).
  func forget(_ key: Key) {
    self.queue.withLock { queue in
      queue.saved.removeValue(forKey: key)
      queue.savedWindows.removeValue(forKey: key)
      queue.failed.removeValue(forKey: key)
    }
  }

  /// Saves batches until nothing it may take waits.
  private func flush() async {
    while true {
      let taken = self.queue.withLock { queue -> (batch: [(Key, Pending)], windows: [Bool])? in
        let batch = queue.pending.filter { queue.inFlight[$0.key] == nil }
        guard !batch.isEmpty else {
          queue.flushes -= 1
          return nil
        }
        // NB: a window unchanged since this lease last wrote it is not written again: most saves
        // carry the state alone.
        let windows = batch.map { key, pending in
          pending.idempotency.version != queue.savedWindows[key] ?? 0
        }
        for (key, pending) in batch {
          queue.pending.removeValue(forKey: key)
          queue.inFlight[key] = InFlight(version: pending.version, waiters: pending.waiters)
          queue.statistics.sends += pending.waiters.count
        }
        queue.statistics.saves += 1
        queue.statistics.states += batch.count
        return (Array(batch), windows)
      }
      guard let (batch, windows) = taken else { return }
      let writes = zip(batch, windows).map { entry, writesWindow in
        SessionWrite(
          key: entry.0,
          state: entry.1.state,
          token: entry.1.token,
          idempotency: writesWindow ? entry.1.idempotency.record : nil
        )
      }
      let outcome: Result<[SessionSaveResult], any Error>
      let start = ContinuousClock.now
      let interval = self.observer?.saveStarted(
        states: writes.count,
        sends: batch.reduce(0) { $0 + $1.1.waiters.count }
      )
      defer {
        self.observer?.sessionsSaved(count: writes.count, duration: start.duration(to: .now))
      }
      do {
        let results = try await self.storage.save(writes, owner: self.owner)
        outcome =
          results.count == writes.count
          ? .success(results)
          : .failure(BatchMismatch(writes: writes.count, results: results.count))
      } catch {
        outcome = .failure(error)
      }
      if case .failure(let error) = outcome {
        interval?.end(error: error)
      } else {
        interval?.end(error: nil)
      }
      self.finish(batch, outcome)
    }
  }

  private func finish(_ batch: [(Key, Pending)], _ outcome: Result<[SessionSaveResult], any Error>)
  {
    var resumptions: [(Waiter, SessionError?)] = []
    var failures: [(Key, UInt64, SaveFailure)] = []
    self.queue.withLock { queue in
      for (index, (key, pending)) in batch.enumerated() {
        var waiters = queue.inFlight.removeValue(forKey: key)?.waiters ?? pending.waiters
        let failure: (SessionError, SaveFailure)?
        switch outcome {
        case .success(let results):
          switch results[index] {
          case .saved:
            queue.saved[key] = max(queue.saved[key] ?? 0, pending.version)
            queue.savedWindows[key] = max(
              queue.savedWindows[key] ?? 0,
              pending.idempotency.version
            )
            failure = nil
          case .staleToken(let owner):
            failure = (
              .ownershipLost(
                key: "\(key)",
                message: """
                  the save was refused: \(owner.map { "'\($0)'" } ?? "another owner") holds the \
                  session's lease now (this instance's lease expired or was taken over); send to \
                  the owner, or retry once its lease has expired
                  """
              ),
              .ownershipLost(currentOwner: owner)
            )
          case .refused(let reason):
            failure = (
              .storageFailed(
                key: "\(key)",
                message: """
                  the storage refused this session's state (\(reason)); the session goes back to \
                  its last saved state
                  """
              ),
              .refused
            )
          }
        case .failure(let error):
          failure = (
            .storageFailed(
              key: "\(key)",
              message: "saving the session failed: \(error) (\(type(of: error)))"
            ),
            .refused
          )
        }
        if let (error, kind) = failure {
          // NB: what waits behind the failed state includes it: it fails too, and nothing later
          // of this lease is taken (the registry discards the store, then forgets the key).
          if let queued = queue.pending.removeValue(forKey: key) { waiters += queued.waiters }
          queue.failed[key] = (pending.token, error)
          failures.append((key, pending.token, kind))
          for waiter in waiters { resumptions.append((waiter, error)) }
        } else {
          for waiter in waiters { resumptions.append((waiter, nil)) }
        }
      }
    }
    for (key, token, kind) in failures { self.saveFailed(key, token, kind) }
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

/// Why a key's save failed.
enum SaveFailure: Sendable {
  /// Another owner holds the lease (named when known).
  case ownershipLost(currentOwner: String?)
  /// The storage refused this key's state, or failed the whole batch.
  case refused
}

/// What a commit does after queuing its state (and the tests' waiters to resume).
private enum CommitStep {
  case done
  case fail(SessionError)
  case wait([CheckedContinuation<Void, Never>])
  case flush([CheckedContinuation<Void, Never>])
}

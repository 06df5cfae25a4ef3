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
    var waiters: Resumptions<Waiter>
    /// Its write's place in the batch that carries it (set when the batch is taken).
    var index = 0
    /// Whether an earlier state of its key is in a flight: it waits for that save to finish.
    var behindFlight = false
  }

  /// What was last saved of a live key: its state's version and its window's.
  private struct Saved: Sendable {
    var version: UInt64 = 0
    var window: UInt64 = 0
  }

  /// A batch being saved: each key's newest state, and the sends waiting for it.
  private struct Flight: Sendable {
    let id: Int
    var batch: [Key: Pending]
  }

  private struct Queue: Sendable {
    var pending: [Key: Pending] = [:]
    /// How many of `pending` are behind a flight.
    var behindFlights = 0
    /// The batches in flight (at most `maximumFlushes`); a key is in at most one.
    var flights: [Flight] = []
    var nextFlight = 0
    /// What was saved per key, while the key is live.
    var saved: [Key: Saved] = [:]
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

    /// The flight carrying `key`, if one does.
    func flight(of key: Key) -> Int? {
      self.flights.firstIndex { $0.batch[key] != nil }
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

    /// Takes what waits for the next save and is in no flight, as a new flight; with it, the
    /// writes, in the flight's order.
    mutating func takeBatch() -> (id: Int, writes: [SessionWrite<Key, State>], sends: Int)? {
      var batch: [Key: Pending]
      if self.behindFlights == 0 {
        // NB: the whole queue at once, no key hashed again: the common case.
        batch = self.pending
        self.pending = [:]
      } else {
        batch = self.pending.filter { !$0.value.behindFlight }
        self.pending = self.pending.filter { $0.value.behindFlight }
      }
      guard !batch.isEmpty else { return nil }
      var writes: [SessionWrite<Key, State>] = []
      writes.reserveCapacity(batch.count)
      var sends = 0
      for index in batch.indices {
        let (key, pending) = batch[index]
        batch.values[index].index = writes.count
        sends += pending.waiters.count
        // NB: a window unchanged since this lease last wrote it is not written again: most saves
        // carry the state alone (and a session with no window never looks).
        let writesWindow =
          pending.idempotency.version != 0
          && pending.idempotency.version != self.saved[key]?.window ?? 0
        writes.append(
          SessionWrite(
            key: key,
            state: pending.state,
            token: pending.token,
            idempotency: writesWindow ? pending.idempotency.record : nil
          )
        )
      }
      let id = self.nextFlight
      self.nextFlight += 1
      self.flights.append(Flight(id: id, batch: batch))
      self.statistics.saves += 1
      self.statistics.states += writes.count
      self.statistics.sends += sends
      return (id, writes, sends)
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
        if let saved = queue.saved[key], saved.version >= version { return .done }
        let flight = queue.flight(of: key)
        if let flight, let index = queue.flights[flight].batch.index(forKey: key),
          queue.flights[flight].batch.values[index].version >= version
        {
          queue.flights[flight].batch.values[index].waiters.append(waiter)
          return .wait([])
        }
        if let index = queue.pending.index(forKey: key) {
          if version > queue.pending.values[index].version {
            queue.pending.values[index].state = state
            queue.pending.values[index].version = version
            queue.pending.values[index].token = token
            queue.pending.values[index].idempotency = idempotency
          }
          queue.pending.values[index].waiters.append(waiter)
        } else {
          var waiters = Resumptions<Waiter>()
          waiters.append(waiter)
          queue.pending[key] = Pending(
            state: state,
            version: version,
            token: token,
            idempotency: idempotency,
            waiters: waiters,
            behindFlight: flight != nil
          )
          if flight != nil { queue.behindFlights += 1 }
        }
        let ready = queue.takeReadyQueuedWaiters()
        guard queue.flushes < self.maximumFlushes, flight == nil else { return .wait(ready) }
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
      queue.failed.removeValue(forKey: key)
    }
  }

  /// Saves batches until nothing it may take waits.
  ///
  /// Each batch is taken when the storage asks for it (``SessionStorage/save(owner:taking:)``):
  /// a storage with one writer asks as late as it can while the save ahead of it runs, so the
  /// batch holds every state that arrived meanwhile.
  private func flush() async {
    while true {
      let slot = LockedBox(Take.notAsked)
      var outcome: Result<[SessionSaveResult], any Error>
      do {
        outcome = .success(try await self.storage.save(owner: self.owner) { self.take(for: slot) })
      } catch {
        outcome = .failure(error)
      }
      if case .notAsked = slot.withLock({ $0 }) {
        // NB: a storage that failed (or returned) without asking still had a batch to save: it
        // is taken now and fails, so its senders hear of it instead of waiting for a save.
        _ = self.take(for: slot)
        if case .success = outcome { outcome = .failure(BatchNotTaken()) }
      }
      guard case .taken(let id, let states, let start, let interval) = slot.withLock({ $0 }) else {
        return
      }
      if case .success(let results) = outcome, results.count != states {
        outcome = .failure(BatchMismatch(writes: states, results: results.count))
      }
      if case .failure(let error) = outcome {
        interval?.end(error: error)
      } else {
        interval?.end(error: nil)
      }
      self.observer?.sessionsSaved(count: states, duration: start.duration(to: .now))
      self.finish(flight: id, outcome)
    }
  }

  /// Takes the next batch for the save that owns `slot`, once; a second call takes nothing.
  private func take(for slot: LockedBox<Take>) -> [SessionWrite<Key, State>] {
    let first = slot.withLock { take in
      guard case .notAsked = take else { return false }
      take = .empty
      return true
    }
    guard first else { return [] }
    let taken = self.queue.withLock { queue in
      let taken = queue.takeBatch()
      if taken == nil { queue.flushes -= 1 }
      return taken
    }
    guard let (id, writes, sends) = taken else { return [] }
    let interval = self.observer?.saveStarted(states: writes.count, sends: sends)
    slot.withLock { $0 = .taken(id: id, states: writes.count, start: .now, interval: interval) }
    return writes
  }

  private func finish(flight id: Int, _ outcome: Result<[SessionSaveResult], any Error>) {
    var resumptions = Resumptions<Waiter>()
    var failedWaiters: [(Waiter, SessionError)] = []
    var failures: [(Key, UInt64, SaveFailure)] = []
    self.queue.withLock { queue in
      guard let place = queue.flights.firstIndex(where: { $0.id == id }) else {
        preconditionFailure("A save finished whose batch is not in flight.")
      }
      let batch = queue.flights.remove(at: place).batch
      for (key, pending) in batch {
        if queue.behindFlights > 0, let index = queue.pending.index(forKey: key),
          queue.pending.values[index].behindFlight
        {
          // NB: a newer state queued behind this save may go in the next batch.
          queue.pending.values[index].behindFlight = false
          queue.behindFlights -= 1
        }
        let failure: (SessionError, SaveFailure)?
        switch outcome {
        case .success(let results):
          failure = Self.failure(of: results[pending.index], key: key, savingAs: self.owner)
        case .failure(let error):
          failure = (
            .storageFailed(
              key: "\(key)",
              message: "saving the session failed: \(error) (\(type(of: error)))"
            ),
            .refused
          )
        }
        guard let (error, kind) = failure else {
          Self.record(pending, in: &queue.saved[key, default: Saved()])
          resumptions.append(contentsOf: pending.waiters)
          continue
        }
        // NB: what waits behind the failed state includes it: it fails too, and nothing later
        // of this lease is taken (the registry discards the store, then forgets the key).
        var waiters = pending.waiters
        if let queued = queue.pending.removeValue(forKey: key) {
          waiters.append(contentsOf: queued.waiters)
        }
        queue.failed[key] = (pending.token, error)
        failures.append((key, pending.token, kind))
        for waiter in waiters.all { failedWaiters.append((waiter, error)) }
      }
    }
    for (key, token, kind) in failures { self.saveFailed(key, token, kind) }
    if let first = resumptions.first {
      first.resume()
      for waiter in resumptions.others { waiter.resume() }
    }
    for (waiter, failure) in failedWaiters { waiter.resume(throwing: failure) }
  }

  /// Records in `saved` that `pending`'s state and window are saved.
  private static func record(_ pending: Pending, in saved: inout Saved) {
    saved.version = max(saved.version, pending.version)
    saved.window = max(saved.window, pending.idempotency.version)
  }

  /// Why one write of a batch failed, as its senders and the registry see it; `nil` if saved.
  private static func failure(
    of result: SessionSaveResult,
    key: Key,
    savingAs saver: String
  ) -> (SessionError, SaveFailure)? {
    switch result {
    case .saved:
      return nil
    case .staleToken(let owner) where owner == saver:
      // NB: a lease is never taken from itself: another instance runs under this name.
      return (
        .ownershipLost(
          key: "\(key)",
          message: """
            the save was refused: another instance took the session's lease under this \
            instance's own owner name ('\(saver)'); give each instance a name of its own
            """
        ),
        .ownershipLost(currentOwner: owner)
      )
    case .staleToken(let owner):
      return (
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
      return (
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
  }

  /// What one save took of the queue.
  private enum Take: Sendable {
    /// The storage has not asked for its batch.
    case notAsked
    /// It asked, and nothing was waiting: this flush is over.
    case empty
    /// It took the flight `id` of `states` writes.
    case taken(
      id: Int,
      states: Int,
      start: ContinuousClock.Instant,
      interval: (any SessionInterval)?
    )
  }

  /// A backend saved without asking for its batch.
  struct BatchNotTaken: Error, CustomStringConvertible {
    var description: String {
      "the storage returned from save(owner:taking:) without taking its batch"
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

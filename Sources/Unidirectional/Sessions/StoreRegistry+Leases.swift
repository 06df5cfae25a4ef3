import Synchronization

extension StoreRegistry {
  // MARK: - Ownership

  /// A save or a renewal found that another owner holds `key`'s lease, or storage refused or
  /// failed its save: shut its store down (no save), so pending and later sends fail, go to the
  /// owner, or (a failed save) reactivate from the last saved state.
  func saveFailed(_ key: Key, token: UInt64, _ failure: SaveFailure) {
    let entry = self.guarded.withLock { guarded -> Entry? in
      guard let entry = guarded.entries[key], entry.token == token else { return nil }
      switch failure {
      case .ownershipLost:
        entry.ownershipWasLost = true
        self.registryObserver?.ownershipLost(key: "\(key)")
      case .refused:
        entry.saveFailed = true
        self.registryObserver?.storageFailed(key: "\(key)")
      }
      guard case .live = entry.phase else { return nil }
      self.beginPassivating(entry, in: &guarded, reason: .discarded)
      return entry
    }
    if let entry { Task { _ = await self.finishPassivating(entry) } }
  }

  func startRenewingLeases() {
    guard let storage = self.storage else { return }
    self.guarded.withLock { guarded in
      guard guarded.renewal == nil, !guarded.isShutDown, !guarded.entries.isEmpty else { return }
      let (clock, interval) = (self.leaseHost.hostClock, storage.leaseDuration / 3)
      guarded.renewal = renewing(every: interval, on: clock) { [weak self] in
        guard let self else { return false }
        await self.renewLeases()
        return true
      }
    }
  }

  /// Removes `entry`; when it was the last, takes the renewals for the caller to cancel.
  ///
  /// A registry that holds no key renews nothing, and leaves no sleep on its clock, so a test's
  /// `TestClock.run()` returns once the last key has passivated. The caller cancels them after
  /// the lock; the next activation starts them again.
  func remove(_ entry: Entry, in guarded: inout Guarded) -> Task<Void, Never>? {
    guard guarded.entries[entry.key] === entry else { return nil }
    guarded.entries.removeValue(forKey: entry.key)
    // NB: below capacity no eviction is near, and the kept order would hold on to the stores
    // that idle timeouts passivate (the oldest, the very ones it keeps) until the next one.
    if guarded.liveCount < self.capacity { guarded.evictionOrder.removeAll() }
    guard guarded.entries.isEmpty else { return nil }
    defer { guarded.renewal = nil }
    return guarded.renewal
  }

  /// Sleeps until the earliest of `entries`' leases may have run out, discards the stores whose
  /// leases have, and again, until cancelled (the renewal was answered) or none is left to watch.
  ///
  /// NB: on the renewal's own list, with no pass over the registry under its lock: only the
  /// entries whose time is up take the lock, to be discarded.
  private func discardStoresAsTheirLeasesLapse(_ entries: [Entry]) async {
    guard let storage = self.storage else { return }
    // A pause between passes: entries whose leases run out one after another are discarded in
    // a few passes, not one each.
    let pause = storage.leaseDuration.nanoseconds / 10
    var watched = entries
    var isFirstPass = true
    while !Task.isCancelled,
      let earliest = watched.lazy.map({ $0.leaseHeldUntil.load(ordering: .relaxed) }).min()
    {
      do {
        try await sleep(on: self.leaseHost.hostClock) {
          let due = earliest - self.leaseHost.nowNanoseconds
          return isFirstPass ? due : max(due, pause)
        }
      } catch { return }
      let now = self.leaseHost.nowNanoseconds
      watched.removeAll { entry in
        guard entry.leaseHeldUntil.load(ordering: .relaxed) <= now else { return false }
        _ = self.leaseIsHeld(entry)
        return true
      }
      isFirstPass = false
    }
  }

  /// Renews the leases of every live or passivating key.
  func renewLeases() async {
    guard let storage = self.storage else { return }
    let held = self.guarded.withLock { guarded in
      guarded.entries.values.compactMap { entry -> (Entry, SessionLease<Key>)? in
        if case .activating = entry.phase { return nil }
        return (entry, SessionLease(key: entry.key, token: entry.token))
      }
    }
    guard !held.isEmpty else { return }
    // NB: a renewal stuck on a database gone silent can take as long as the storage's own
    // timeouts, longer than a lease; meanwhile, a store whose lease runs out is discarded, so it
    // does not go on streaming states another instance may have moved on from. Cancelled, not
    // awaited: the next renewal's wait begins as soon as this one is answered.
    let watcher = Task { [held] in await self.discardStoresAsTheirLeasesLapse(held.map(\.0)) }
    defer { watcher.cancel() }
    // NB: a slice at a time (the storage's `leasesPerRenewal`), each counted from when it was
    // asked for: renewing a hundred thousand leases a row each under load takes seconds, and
    // counted from the renewal's start, every lease of a renewal that took longer than the
    // lease's slack was taken for lapsed, and its store discarded (every store of a busy
    // instance, every few renewals).
    let perCall = max(1, storage.leasesPerRenewal)
    for start in stride(from: 0, to: held.count, by: perCall) {
      let slice = held[start..<min(start + perCall, held.count)]
      let asked = self.leaseHost.nowNanoseconds
      guard let lost = try? await storage.renew(slice.map(\.1), owner: self.owner) else {
        // NB: storage did not answer: a lease whose time has run out may be another instance's
        // by now. Its store is discarded without waiting for a read, so a stream of its states
        // ends and its reader reconnects where the key lives.
        for (entry, _) in held[start...] { _ = self.leaseIsHeld(entry) }
        return
      }
      let lostKeys = Set(lost)
      let heldUntil = asked + self.leaseCountedOn(storage)
      for (entry, lease) in slice {
        if lostKeys.contains(lease.key) {
          self.saveFailed(lease.key, token: lease.token, .ownershipLost(currentOwner: nil))
        } else {
          entry.leaseHeldUntil.store(heldUntil, ordering: .relaxed)
        }
      }
    }
  }

  /// For how long after asking for a lease (or its renewal) this instance counts on holding it,
  /// in nanoseconds: the lease less a tenth, for the time the request took to reach storage and
  /// for the two clocks' drift.
  func leaseCountedOn(_ storage: any SessionStorage<Key, State>) -> Int64 {
    let (seconds, attoseconds) = (storage.leaseDuration * 9 / 10).components
    return seconds * 1_000_000_000 + attoseconds / 1_000_000_000
  }

  /// Whether `entry`'s lease is known to be held.
  ///
  /// One whose renewals failed for a lease's length (storage out of reach, or this process
  /// paused) may belong to another instance by now: its store is discarded, as on a lost lease,
  /// so what it holds is not read as the key's state.
  ///
  /// Sends need no such check: their saves are fenced.
  func leaseIsHeld(_ entry: Entry) -> Bool {
    let now = self.leaseHost.nowNanoseconds
    guard now >= entry.leaseHeldUntil.load(ordering: .relaxed) else { return true }
    let token = self.guarded.withLock { _ in entry.token }
    self.saveFailed(entry.key, token: token, .ownershipLost(currentOwner: nil))
    return false
  }
}

/// Sleeps on `clock` for the nanoseconds `wait` returns (none when it returns zero or less),
/// counted from an instant read before `wait` ran.
///
/// NB: a deadline, not a length: a clock that moves between the wait's computing and the sleep (a
/// test's, advanced by another task) shortens the sleep; slept `for` the length, the deadline
/// would be counted from the moved clock, past the time it was for, and a test's clock never
/// advanced that far left the watcher asleep.
func sleep<C: Clock<Duration>>(on clock: C, _ wait: () -> Int64) async throws {
  let start = clock.now
  let nanoseconds = wait()
  guard nanoseconds > 0 else { return }
  try await clock.sleep(until: start.advanced(by: .nanoseconds(nanoseconds)), tolerance: nil)
}

/// A task that calls `renew` every `interval` on `clock`, the first time one interval from now,
/// until it returns `false` or the task is cancelled.
///
/// At a fixed rate: each tick is due one interval after the one before, not after the renewal
/// ended, so a tick whose time has passed when it is asked for (a renewal that took longer than
/// an interval, or a test's clock advanced past it meanwhile) renews at once instead of being
/// pushed back by an interval. After falling behind by more, it renews once, not once for every
/// tick missed.
private func renewing(
  every interval: Duration,
  on clock: some Clock<Duration>,
  _ renew: @escaping @Sendable () async -> Bool
) -> Task<Void, Never> {
  // NB: the first deadline is read here, not in the task, which may start after the clock moved.
  let first = clock.now.advanced(by: interval)
  return Task {
    var next = first
    while !Task.isCancelled {
      do { try await clock.sleep(until: next, tolerance: nil) } catch { return }
      guard await renew() else { return }
      next = next.advanced(by: interval)
      let behind = next.duration(to: clock.now)
      if behind > interval {
        next = next.advanced(by: interval * Int(behind / interval))
      }
    }
  }
}

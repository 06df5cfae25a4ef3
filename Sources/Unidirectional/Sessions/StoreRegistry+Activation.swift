import Synchronization

extension StoreRegistry {
  // MARK: - Activating

  /// The entry of `key` once it is live, and its store as it was read under the lock (`nil` if
  /// the entry stopped being live meanwhile): activates it, or waits for its activation or
  /// passivation to end.
  ///
  /// NB: the store is read here, under the lock, not from the entry afterwards: passivation
  /// changes the entry's phase under the lock, and a read outside it raced that write (TSan).
  func liveEntry(
    for key: Key
  ) async throws -> (entry: Entry, store: Store<State, Action>?) {
    while true {
      let step = try self.guarded.withLock {
        guarded throws(SessionError) -> EntryStep<Entry, Store<State, Action>> in
        guard !guarded.isShutDown else {
          throw .shutDown(
            key: "\(key)",
            message: "the registry has shut down; it takes no more actions"
          )
        }
        if let entry = guarded.entries[key] {
          if case .live(let store) = entry.phase { return .live(entry, store) }
          return .wait(entry)
        }
        let entry = Entry(key: key, clock: self.sessionClock, registry: self)
        guarded.entries[key] = entry
        return .activate(entry)
      }
      switch step {
      case .live(let entry, let store):
        return (entry, store)
      case .wait(let entry):
        await self.waitForChange(of: entry)
      case .activate(let entry):
        try await self.activate(entry)
        return (entry, self.guarded.withLock { _ in entry.liveStore })
      }
    }
  }

  /// Waits until `entry` is live or gone.
  func waitForChange(of entry: Entry) async {
    await withUnsafeContinuation { (continuation: UnsafeContinuation<Void, Never>) in
      let waiting = self.guarded.withLock { guarded -> Bool in
        guard guarded.entries[entry.key] === entry else { return false }
        if case .live = entry.phase { return false }
        entry.waiters.append(continuation)
        return true
      }
      if !waiting { continuation.resume() }
    }
  }

  func activate(_ entry: Entry) async throws {
    let interval = self.registryObserver?.activationStarted(
      key: "\(entry.key)",
      within: SessionIntervals.send
    )
    guard let interval else { return try await self.activateUnmeasured(entry) }
    do {
      try await self.activateUnmeasured(entry)
      interval.end(error: nil)
    } catch {
      interval.end(error: error)
      throw error
    }
  }

  func activateUnmeasured(_ entry: Entry) async throws {
    let key = entry.key
    var state: State?
    var token: UInt64 = 0
    var idempotency = IdempotencyRecord()
    if let storage = self.storage {
      do {
        let address = self.guarded.withLock { $0.advertisedAddress }
        let asked = self.leaseHost.nowNanoseconds
        switch try await storage.acquire(key, owner: self.owner, address: address) {
        case .acquired(let acquiredToken, let stored, let keys):
          entry.leaseHeldUntil.store(asked + self.leaseCountedOn(storage), ordering: .relaxed)
          self.forgetOwner(of: key)
          token = acquiredToken
          state = stored
          idempotency = keys
        case .heldBy(let owner, let address, let expiresIn):
          let holder = SessionOwner(name: owner, address: address, leaseLeft: expiresIn)
          let refusal = self.ownershipLost(to: holder, of: key)
          self.removeFailed(entry)
          throw refusal
        }
      } catch let error as SessionError {
        throw error
      } catch {
        self.removeFailed(entry)
        throw self.loadingFailed(key, error)
      }
    }
    entry.activity.restore(idempotency, capacity: self.idempotencyWindow)
    let stale = self.guarded.withLock { $0.breaksActivation }
    let store = self.makeStore(
      key,
      stale ? nil : state,
      entry.activity,
      self.dependencies,
      self.makeObserver(key)
    )
    let (waiters, victims, shutDown) = self.guarded.withLock {
      guarded -> ([UnsafeContinuation<Void, Never>], [Entry], Bool) in
      let waiters = entry.waiters
      entry.waiters = []
      guard !guarded.isShutDown else {
        guarded.entries.removeValue(forKey: key)
        return (waiters, [], true)
      }
      entry.phase = .live(store)
      guarded.liveStores[key] = store
      entry.token = token
      self.registryObserver?.sessionActivated(key: "\(key)")
      self.registryObserver?.liveCountChanged(to: guarded.liveCount)
      var victims: [Entry] = []
      while guarded.liveCount > self.capacity,
        let victim = Self.leastRecentlyUsed(&guarded, except: entry)
      {
        self.beginPassivating(victim, in: &guarded, reason: .capacity)
        victims.append(victim)
      }
      return (waiters, victims, false)
    }
    if shutDown {
      await store.shutdown()
      if let storage = self.storage {
        try? await storage.release([SessionLease(key: key, token: token)], owner: self.owner)
      }
      for waiter in waiters { waiter.resume() }
      throw SessionError.shutDown(
        key: "\(key)",
        message: "the registry shut down while the session was activating"
      )
    }
    self.armIdleTimer(entry)
    if self.storage != nil { self.startRenewingLeases() }
    for waiter in waiters { waiter.resume() }
    for victim in victims { Task { _ = await self.finishPassivating(victim) } }
  }

  /// Removes an entry whose activation failed; its waiters try again (and fail the same way, or
  /// succeed if the cause has gone).
  func removeFailed(_ entry: Entry) {
    let (waiters, renewal) = self.guarded.withLock { guarded in
      defer { entry.waiters = [] }
      return (entry.waiters, self.remove(entry, in: &guarded))
    }
    renewal?.cancel()
    for waiter in waiters { waiter.resume() }
  }

  /// The least recently used live entry but `excluded`: the one to evict.
  ///
  /// Exact, at a pass over the live entries per sixteenth of them evicted, not one per eviction:
  /// a pass for every eviction held the registry's lock over every session, so at a large
  /// capacity each activation held up every request. A pass keeps the oldest
  /// sixteenth (``Guarded/evictionOrder``) with their stamps; an eviction takes from it the
  /// oldest still live with its stamp unchanged. An entry untouched since the pass is older than
  /// every one outside the kept part (a touch takes a stamp newer than every earlier one, and an
  /// activation a newer one still), so it is the least recently used of all.
  static func leastRecentlyUsed(_ guarded: inout Guarded, except excluded: Entry) -> Entry? {
    if let kept = Self.oldestKept(&guarded, except: excluded) { return kept }
    var live: [(entry: Entry, stamp: UInt64)] = []
    live.reserveCapacity(guarded.liveCount)
    for entry in guarded.entries.values where entry !== excluded {
      guard case .live = entry.phase else { continue }
      live.append((entry, entry.activity.recency))
    }
    live.sort { $0.stamp > $1.stamp }
    guarded.evictionOrder = Array(live.suffix(max(8, live.count / 16)))
    return Self.oldestKept(&guarded, except: excluded)
  }

  /// Takes from the kept eviction order the oldest entry still live with its stamp unchanged.
  private static func oldestKept(_ guarded: inout Guarded, except excluded: Entry) -> Entry? {
    while let (entry, stamp) = guarded.evictionOrder.popLast() {
      guard entry !== excluded, guarded.entries[entry.key] === entry,
        case .live = entry.phase, entry.activity.recency == stamp
      else { continue }
      return entry
    }
    return nil
  }

  // MARK: - Idle timers

  func armIdleTimer(_ entry: Entry) {
    guard let idleTimeout = self.idleTimeout else { return }
    self.guarded.withLock { _ in
      // NB: not queued yet: nothing else reads the deadline until `arm` takes the host's lock.
      entry.deadline = entry.activity.lastActive + idleTimeout
      entry.isIdleTimerArmed = true
    }
    entry.host.arm(entry)
  }

  /// Passivates the entry if it has been idle for the whole timeout; otherwise waits for the rest.
  func idleTimerFired(_ entry: Entry) {
    guard let idleTimeout = self.idleTimeout else { return }
    let host = self.sessionClock.host
    let next = self.guarded.withLock { guarded -> IdleStep in
      guard !guarded.isShutDown, guarded.entries[entry.key] === entry, case .live = entry.phase
      else { return .none }
      let deadline = entry.activity.lastActive + idleTimeout
      if deadline > host.nowOffset {
        entry.deadline = deadline
        return .rearm
      }
      self.beginPassivating(entry, in: &guarded, reason: .idle)
      return .passivate
    }
    switch next {
    case .none: return
    case .rearm: host.arm(entry)
    case .passivate: Task { _ = await self.finishPassivating(entry) }
    }
  }
}

/// What a send does with the entry it found.
private enum EntryStep<Entry, Store> {
  case live(Entry, Store)
  case wait(Entry)
  case activate(Entry)
}

/// What a fired idle timer does.
private enum IdleStep {
  case none
  case rearm
  case passivate
}

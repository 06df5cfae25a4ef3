extension StoreRegistry {
  // MARK: - Reading

  /// The state of `key`'s session, activating it if it is not live (with storage: loading it).
  ///
  /// With storage, a key never saved reads as its initial state without activating, and a key
  /// whose activation fails in storage (a full disk refuses the lease's write) reads as storage
  /// holds it, its last acknowledged state. A live key's store is read only while its lease is
  /// known to be held: one this instance could not renew in time (storage out of reach, a paused
  /// process) is discarded and the key activated again, from storage, so the read never answers
  /// a state another instance may have moved on from.
  ///
  /// Reading reduces no action: it neither restarts the idle period nor makes the key the most
  /// recently used (activating it does both).
  ///
  /// - Parameter key: The session's key.
  /// - Returns: The state, as of the last action reduced.
  /// - Throws: ``SessionError``.
  ///
  /// NB: a live key's read without storage specialized in the caller's module, as the sends'.
  @inlinable
  public func state(of key: Key) async throws -> State {
    if self.storage == nil, let store = self.guarded.withLockInlined({ $0.liveStores[key] }) {
      return await store.state
    }
    return try await self.activatedState(of: key)
  }

  @usableFromInline
  func activatedState(of key: Key) async throws -> State {
    let known = try self.guarded.withLock { guarded throws(SessionError) -> Bool in
      guard !guarded.isShutDown else {
        throw .shutDown(key: "\(key)", message: "the registry has shut down; it reads no more")
      }
      return guarded.entries[key] != nil
    }
    if let storage = self.storage, !known {
      // NB: a key never saved reads as its initial state without activating: taking its lease
      // would write a row for every id a client ever asked about.
      let stored: State?
      do {
        stored = try await storage.load(key)
      } catch {
        throw self.loadingFailed(key, error)
      }
      guard let stored else {
        return DependencyValues.withValues(self.dependencies) { self.initialState(key) }
      }
      do {
        let (entry, store) = try await self.liveEntry(for: key)
        if let store, self.leaseIsHeld(entry) { return await store.state }
      } catch let error as SessionError {
        // NB: taking the lease failed where reading did not (a full disk refuses every write):
        // what storage holds is the key's last acknowledged state, so the read is answered.
        guard case .storageFailed = error else { throw error }
        return stored
      }
      return try await self.activatedState(of: key)
    }
    let (entry, store) = try await self.liveEntry(for: key)
    if let store, self.leaseIsHeld(entry) { return await store.state }
    return try await self.activatedState(of: key)
  }

  /// The error a send or read throws when loading `key` failed; an unreadable state is also
  /// reported to the key's observer (it needs a person, not a retry).
  func loadingFailed(_ key: Key, _ error: any Error) -> SessionError {
    if let error = error as? SessionError { return error }
    if let unreadable = error as? SessionStateUnreadable {
      let failure = SessionError.stateUnreadable(
        key: "\(key)",
        storedVersion: unreadable.storedVersion,
        message: unreadable.reason
      )
      self.makeObserver(key)?.issueReported(ReportedIssue(failure.description))
      return failure
    }
    self.registryObserver?.storageFailed(key: "\(key)")
    return .storageFailed(
      key: "\(key)",
      message: "loading the session failed: \(error) (\(type(of: error)))"
    )
  }

  /// The live store of `key`, if it is live (not activating, passivating or absent).
  ///
  /// Neither restarts its idle period nor makes it the most recently used.
  public func liveStore(for key: Key) async -> Store<State, Action>? {
    self.guarded.withLock { $0.liveStores[key] }
  }

  /// The store of `key`, activating it if it is not live (with storage: taking its lease and
  /// loading its state), for work that needs the store itself, such as a stream of its states.
  ///
  /// Neither restarts its idle period nor makes it the most recently used.
  ///
  /// - Parameter key: The session's key.
  /// - Returns: The key's live store (it may passivate later, as any live store does).
  /// - Throws: ``SessionError``.
  public func activatedStore(for key: Key) async throws -> Store<State, Action> {
    while true {
      let (entry, store) = try await self.liveEntry(for: key)
      if let store, self.leaseIsHeld(entry) { return store }
    }
  }

  /// The number of live stores (not counting those activating or passivating).
  public var liveCount: Int {
    self.guarded.withLock { $0.liveCount }
  }
}

extension StoreRegistry {
  /// Erases `key`'s session: its store ends at once (its effects are cancelled) and, with storage,
  /// its row (state, idempotency keys and lease) is removed before this returns.
  ///
  /// For a privacy request or a closed account. A later send starts from the initial state.
  /// Erasing a key never saved succeeds. With storage, the erasure is fenced as a save is: it
  /// happens under this registry's lease, or (for a key not live here) only while no other
  /// instance holds an unexpired lease.
  ///
  /// - Parameter key: The session's key.
  /// - Throws: ``SessionError/ownershipLost(key:message:)`` when another instance owns the
  ///   session; ``SessionError/storageFailed(key:message:)`` when storage failed (nothing was
  ///   erased from it; erase again); ``SessionError/shutDown(key:message:)``.
  public func erase(_ key: Key) async throws {
    while true {
      let step = try self.guarded.withLock {
        guarded throws(SessionError) -> EraseStep<Entry> in
        guard !guarded.isShutDown else {
          throw .shutDown(key: "\(key)", message: "the registry has shut down; it erases nothing")
        }
        guard let entry = guarded.entries[key] else {
          // NB: an entry that is never made live holds the key while storage erases it: sends
          // wait for it, then activate from what is left (nothing).
          let entry = Entry(key: key, clock: self.sessionClock, registry: self)
          entry.isErasing = true
          guarded.entries[key] = entry
          return .notLive(entry)
        }
        switch entry.phase {
        case .live:
          entry.isErasing = true
          self.beginPassivating(entry, in: &guarded, reason: .erased)
          return .live(entry)
        case .activating, .passivating:
          return .wait(entry)
        }
      }
      switch step {
      case .notLive(let entry):
        defer { self.removeFailed(entry) }
        guard let storage = self.storage else { return }
        if let failure = await self.eraseStored(key, token: nil, in: storage) { throw failure }
        return
      case .live(let entry):
        if let failure = await self.finishPassivating(entry) { throw failure }
        return
      case .wait(let entry):
        await self.waitForChange(of: entry)
      }
    }
  }

  /// Removes `key`'s row from storage under `token` (`nil`: this registry holds no lease).
  ///
  /// A row another owner's lease holds is not erased: the error names that owner, and
  /// ``owner(of:)`` learns it with its address, as a send would, so the request can be forwarded.
  func eraseStored(
    _ key: Key,
    token: UInt64?,
    in storage: any SessionStorage<Key, State>
  ) async -> SessionError? {
    var token = token
    // NB: bounded: a lease let go between the erase and the look at its holder is tried again.
    for _ in 0..<3 {
      do {
        switch try await storage.erase(key, token: token, owner: self.owner) {
        case .saved:
          return nil
        case .refused(let reason):
          return .storageFailed(
            key: "\(key)",
            message: "the storage refused to erase the session: \(reason)"
          )
        case .staleToken:
          switch try await storage.acquire(key, owner: self.owner, address: self.advertisedAddress)
          {
          case .heldBy(let name, let address, let left):
            let holder = SessionOwner(name: name, address: address, leaseLeft: left)
            return self.ownershipLost(to: holder, of: key)
          case .acquired(let acquired, _, _):
            // NB: the holder let the lease go meanwhile; it is this registry's now.
            self.forgetOwner(of: key)
            token = acquired
          }
        }
      } catch is SessionStateUnreadable {
        // NB: the lease is free and the state does not read, so nothing was taken: erase again.
        token = nil
      } catch {
        self.registryObserver?.storageFailed(key: "\(key)")
        return .storageFailed(
          key: "\(key)",
          message: "erasing the session failed (nothing was erased): \(error) (\(type(of: error)))"
        )
      }
    }
    return .ownershipLost(
      key: "\(key)",
      message: "the session's lease changed hands while it was being erased; retry"
    )
  }
}

/// What `erase(_:)` does with the key's entry.
private enum EraseStep<Entry> {
  /// The key is not live: its entry holds it while storage erases it.
  case notLive(Entry)
  /// The key is live: its store ends, then storage erases it.
  case live(Entry)
  /// The key is activating or passivating: wait, then look again.
  case wait(Entry)
}

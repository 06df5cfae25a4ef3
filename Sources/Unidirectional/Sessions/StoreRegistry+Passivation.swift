extension StoreRegistry {
  // MARK: - Passivating

  /// Passivates `key`'s store: a graceful shutdown (up to the registry's
  /// `passivationGracePeriod`), then, with storage, a save and the lease's release.
  ///
  /// Does nothing if `key` is not live; waits if it is already passivating.
  ///
  /// - Throws: ``SessionError/storageFailed(key:message:)`` if the final save fails.
  public func passivate(_ key: Key) async throws {
    let step = self.guarded.withLock { guarded -> PassivateStep<Entry> in
      guard let entry = guarded.entries[key] else { return .none }
      switch entry.phase {
      case .live:
        self.beginPassivating(entry, in: &guarded, reason: .explicit)
        return .passivate(entry)
      case .passivating: return .wait(entry)
      case .activating: return .none
      }
    }
    switch step {
    case .passivate(let entry):
      if let failure = await self.finishPassivating(entry) { throw failure }
    case .wait(let entry):
      await self.waitForChange(of: entry)
    case .none:
      return
    }
  }

  /// Marks a live entry passivating (under the lock): it is no longer live.
  func beginPassivating(_ entry: Entry, in guarded: inout Guarded, reason: PassivationReason) {
    guard case .live(let store) = entry.phase else { return }
    entry.phase = .passivating(store)
    guarded.liveStores.removeValue(forKey: entry.key)
    self.registryObserver?.sessionPassivated(key: "\(entry.key)", reason: reason)
    self.registryObserver?.liveCountChanged(to: guarded.liveCount)
  }

  /// Shuts a passivating entry's store down, saves its state and releases its lease, then lets
  /// the sends waiting for it through (to a new activation).
  ///
  /// A store whose lease was lost, or whose save failed, shuts down at once and saves nothing:
  /// its state is not (or no longer) what storage holds. An erased one then removes its row.
  ///
  /// With `releaseLater`, a saved store's lease goes to it instead of to storage (the registry's
  /// shutdown releases them all together).
  func finishPassivating(
    _ entry: Entry,
    gracePeriod: Duration? = nil,
    releaseLater: (@Sendable (SessionLease<Key>) -> Void)? = nil
  ) async
    -> SessionError?
  {
    let (store, armed, token, ending) = self.guarded.withLock {
      _ -> (Store<State, Action>?, Bool, UInt64, Ending) in
      guard case .passivating(let store) = entry.phase else { return (nil, false, 0, .discard) }
      defer { entry.isIdleTimerArmed = false }
      return (store, entry.isIdleTimerArmed, entry.token, entry.ending)
    }
    guard let store else { return nil }
    if armed { entry.host.disarm(entry) }
    var failure: SessionError?
    if ending != .save {
      await store.shutdown()
      if let storage = self.storage {
        // NB: the sends reduced before the shutdown end first (their saves fail: the group commit
        // refuses this lease's states once one failed), so nothing of this store is saved after.
        await self.waitForSaves(of: entry)
        if ending == .erase {
          failure = await self.eraseStored(entry.key, token: token, in: storage)
        } else if ending == .discardAndRelease {
          try? await storage.release(
            [SessionLease(key: entry.key, token: token)],
            owner: self.owner
          )
        }
      }
    } else {
      await store.shutdown(
        gracePeriod: gracePeriod ?? self.passivationGracePeriod,
        clock: self.clock
      )
      if let storage = self.storage, let commits = self.commits {
        await self.waitForSaves(of: entry)
        do {
          // NB: a store that reduced no action holds what storage holds, or, for a key never
          // saved (a stream only watched it), nothing worth a row: saving it would write one.
          if entry.activity.version > 0 {
            try await commits.commit(
              entry.key,
              state: await store.state,
              version: entry.activity.version,
              token: token,
              idempotency: entry.activity.idempotency
            )
          }
          let lease = SessionLease(key: entry.key, token: token)
          if let releaseLater {
            releaseLater(lease)
          } else {
            try await storage.release([lease], owner: self.owner)
          }
        } catch let error as SessionError {
          failure = error
        } catch {
          failure = .storageFailed(
            key: "\(entry.key)",
            message: "releasing the session's lease failed: \(error) (\(type(of: error)))"
          )
        }
      }
    }
    self.commits?.forget(entry.key)
    let (waiters, renewal) = self.guarded.withLock { guarded in
      defer { entry.waiters = [] }
      return (entry.waiters, self.remove(entry, in: &guarded))
    }
    renewal?.cancel()
    for waiter in waiters { waiter.resume() }
    return failure
  }

  /// A store the registry considers live refused an action: it was shut down from outside.
  ///
  /// (By a holder of ``liveStore(for:)``.) Passivates the entry so the next send gets a new store.
  func storeClosedUnderneath(_ entry: Entry, _ store: Store<State, Action>) {
    let passivate = self.guarded.withLock { guarded -> Bool in
      guard case .live(let live) = entry.phase, live === store else { return false }
      self.beginPassivating(entry, in: &guarded, reason: .explicit)
      return true
    }
    if passivate { Task { _ = await self.finishPassivating(entry) } }
  }
}

/// What `passivate(_:)` does.
private enum PassivateStep<Entry> {
  case passivate(Entry)
  case wait(Entry)
  case none
}

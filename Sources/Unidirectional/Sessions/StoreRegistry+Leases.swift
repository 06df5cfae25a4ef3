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
    let start = self.guarded.withLock { guarded -> Bool in
      guard guarded.renewal == nil, !guarded.isShutDown else { return false }
      guarded.renewal = Task { [weak self, clock] in
        let interval = storage.leaseDuration / 3
        while !Task.isCancelled {
          do { try await clock.sleep(for: interval) } catch { return }
          guard let self else { return }
          await self.renewLeases()
        }
      }
      return true
    }
    _ = start
  }

  /// Renews the leases of every live or passivating key.
  func renewLeases() async {
    guard let storage = self.storage else { return }
    let leases = self.guarded.withLock { guarded in
      guarded.entries.values.compactMap { entry -> SessionLease<Key>? in
        if case .activating = entry.phase { return nil }
        return SessionLease(key: entry.key, token: entry.token)
      }
    }
    guard !leases.isEmpty else { return }
    guard let lost = try? await storage.renew(leases, owner: self.owner) else { return }
    let tokens = Dictionary(leases.map { ($0.key, $0.token) }, uniquingKeysWith: { $1 })
    for key in lost {
      if let token = tokens[key] {
        self.saveFailed(key, token: token, .ownershipLost(currentOwner: nil))
      }
    }
  }
}

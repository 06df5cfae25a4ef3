extension StoreRegistry {
  // MARK: - Shutting down

  /// Passivates every live store, concurrently, and takes no more actions.
  ///
  /// Each store shuts down gracefully within `gracePeriod` (marked effects are cancelled at once),
  /// then, with storage, saves; the saved stores' leases are released together at the end, a
  /// thousand to a call (one call a lease held a server with many sessions in its shutdown for
  /// as many writes). A save that fails is reported as an issue naming the key and the error, as
  /// is a release that fails (those leases expire instead). Later sends throw
  /// ``SessionError/shutDown(key:message:)``.
  ///
  /// - Parameter gracePeriod: How long each store's unmarked effects may run on.
  public func shutdown(gracePeriod: Duration) async {
    let (live, busy, renewal) = self.guarded.withLock {
      guarded -> ([Entry], [Entry], Task<Void, Never>?) in
      guarded.isShutDown = true
      var live: [Entry] = []
      var busy: [Entry] = []
      for entry in guarded.entries.values {
        if case .live = entry.phase {
          self.beginPassivating(entry, in: &guarded, reason: .shutdown)
          live.append(entry)
        } else {
          busy.append(entry)
        }
      }
      defer { guarded.renewal = nil }
      return (live, busy, guarded.renewal)
    }
    renewal?.cancel()
    let saved = LockedBox<[SessionLease<Key>]>([])
    await withTaskGroup(of: Void.self) { group in
      for entry in live {
        group.addTask {
          let failure = await self.finishPassivating(entry, gracePeriod: gracePeriod) { lease in
            saved.withLock { $0.append(lease) }
          }
          if let failure {
            reportIssue(
              """
              Shutting down the session '\(entry.key)' did not save its state.

                \(failure)
              """
            )
          }
        }
      }
    }
    for entry in busy { await self.waitUntilGone(entry) }
    await self.release(saved.withLock { $0 })
  }

  /// Releases `leases`, a thousand to a call; a call that fails is reported, and its leases
  /// expire instead.
  private func release(_ leases: [SessionLease<Key>]) async {
    guard let storage = self.storage else { return }
    let size = 1_000
    for start in stride(from: 0, to: leases.count, by: size) {
      let chunk = Array(leases[start..<min(start + size, leases.count)])
      do {
        try await storage.release(chunk, owner: self.owner)
      } catch {
        reportIssue(
          """
          Releasing the leases of \(chunk.count) sessions at shutdown failed; other instances \
          take them once they expire.

            \(error)
          """
        )
      }
    }
  }

  /// Waits until `entry` has left the registry.
  func waitUntilGone(_ entry: Entry) async {
    while self.guarded.withLock({ $0.entries[entry.key] === entry }) {
      await self.waitForChange(of: entry)
      if case .live = self.guarded.withLock({ _ in entry.phase }) { return }
    }
  }

  /// Breaks activation on purpose (the race test's mutation check).
  package func breakActivationForMutationTest() {
    self.guarded.withLock { $0.breaksActivation = true }
  }

  /// Suspends until `count` sends wait for the next group commit (tests of batching).
  package func waitUntilSavesQueued(_ count: Int) async {
    await self.commits?.waitUntilQueued(count)
  }

  /// What this registry's saves carried so far (zero without storage).
  public var saveStatistics: SaveStatistics {
    self.commits?.statistics ?? SaveStatistics()
  }

  /// Whether ``shutdown(gracePeriod:)`` was called.
  public var isShutDown: Bool {
    self.guarded.withLock { $0.isShutDown }
  }
}

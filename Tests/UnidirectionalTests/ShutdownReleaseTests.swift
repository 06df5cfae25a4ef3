import Synchronization
import Testing
import Unidirectional

/// A registry's shutdown releases its saved sessions' leases together, a thousand to a call,
/// and every lease is released: another owner takes each key at once.
@Suite(.timeLimit(.minutes(1))) struct ShutdownReleaseTests {
  @Test func shutdownReleasesEveryLeaseInCallsOfAThousand() async throws {
    let storage = ReleaseRecordingStorage()
    let clock = TestClock()
    let registry = StoreRegistry(storage: storage, owner: "a", clock: clock) { key in
      SessionLedger.State(key: key)
    } reducer: {
      SessionLedger(clock: clock, gate: Gate())
    }
    for index in 0..<2_500 {
      try await registry.send(.append(index), to: "k\(index)")
    }
    await registry.shutdown(gracePeriod: .seconds(1))
    let calls = storage.releases.withLock { $0 }
    #expect(calls.map(\.count).sorted() == [500, 1_000, 1_000])
    #expect(Set(calls.joined().map(\.key)).count == 2_500)
    // Released, not left to expire: another owner takes any of them now, with its saved state.
    let taken = try await storage.acquire("k1234", owner: "b", address: nil)
    #expect(taken.state?.applied == [1_234])
  }
}

/// In-memory storage that records each release call's leases.
final class ReleaseRecordingStorage: PassThroughStorage {
  let base = InMemorySessionStorage<String, SessionLedger.State>(leaseDuration: .seconds(3_600))
  let releases = Mutex<[[SessionLease<String>]]>([])

  func release(_ leases: [SessionLease<String>], owner: String) async throws {
    self.releases.withLock { $0.append(leases) }
    try await self.base.release(leases, owner: owner)
  }
}

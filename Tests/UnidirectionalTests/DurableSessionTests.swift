import Testing
import Unidirectional

/// Two registries sharing one in-memory storage, as two server instances sharing one database.
///
/// The storage's leases expire on a test clock; the registries' renewals, on the continuous
/// clock every ~3 s, never reach it (a slow run, under ThreadSanitizer, does reach them): a lease
/// expires only when the test moves the storage's clock.
private struct TwoInstances {
  let time = TestClock()
  let storage: InMemorySessionStorage<String, SessionLedger.State>
  let a: StoreRegistry<String, SessionLedger>
  let b: StoreRegistry<String, SessionLedger>

  init() {
    let storage = InMemorySessionStorage<String, SessionLedger.State>(
      clock: self.time,
      leaseDuration: .seconds(10)
    )
    self.storage = storage
    self.a = Self.registry("node-a", storage)
    self.b = Self.registry("node-b", storage)
  }

  static func registry(
    _ owner: String,
    _ storage: InMemorySessionStorage<String, SessionLedger.State>
  ) -> StoreRegistry<String, SessionLedger> {
    StoreRegistry(storage: RenewalsOnHold(base: storage), owner: owner) { key in
      SessionLedger.State(key: key)
    } reducer: {
      SessionLedger(clock: ContinuousClock(), gate: Gate())
    }
  }

  func shutdown() async {
    await self.a.shutdown(gracePeriod: .seconds(1))
    await self.b.shutdown(gracePeriod: .seconds(1))
  }
}

/// A storage whose leases are renewed by the test's clock alone: a renewal keeps every lease
/// and writes nothing.
private struct RenewalsOnHold: PassThroughStorage {
  let base: InMemorySessionStorage<String, SessionLedger.State>

  func renew(_ leases: [SessionLease<String>], owner: String) async throws -> [String] {
    []
  }
}

private struct DiskFull: Error, CustomStringConvertible {
  var description: String { "disk full" }
}

@Suite(.timeLimit(.minutes(1))) struct DurableSessionTests {
  @Test func aSendReturnsOnceItsStateIsStored() async throws {
    let instances = TwoInstances()
    try await instances.a.send(.append(1), to: "alice")
    #expect(instances.storage.storedState(for: "alice")?.applied == [1])
    try await instances.a.send(.append(2), to: "alice")
    #expect(instances.storage.storedState(for: "alice")?.applied == [1, 2])
    #expect(instances.storage.owner(of: "alice") == "node-a")
    await instances.shutdown()
  }

  @Test func activationLoadsTheStoredState() async throws {
    let instances = TwoInstances()
    instances.storage.store(SessionLedger.State(key: "alice", applied: [41]), for: "alice")
    let applied = try await instances.a.send(.append(42), to: "alice", reading: { $0.applied })
    #expect(applied == [41, 42])
    await instances.shutdown()
  }

  @Test func aKeyLiveInOneInstanceIsRefusedByTheOtherNamingTheOwner() async throws {
    let instances = TwoInstances()
    try await instances.a.send(.append(1), to: "alice")
    let error = await #expect(throws: SessionError.self) {
      try await instances.b.send(.append(2), to: "alice")
    }
    guard case .ownershipLost(let key, let message) = error else {
      Issue.record("expected .ownershipLost, got \(String(describing: error))")
      return
    }
    #expect(key == "alice")
    #expect(message.contains("node-a"))
    #expect(instances.storage.storedState(for: "alice")?.applied == [1])
    await instances.shutdown()
  }

  @Test func passivationReleasesTheLeaseSoTheOtherInstanceTakesOverAtOnce() async throws {
    let instances = TwoInstances()
    try await instances.a.send(.append(1), to: "alice")
    try await instances.a.passivate("alice")
    #expect(instances.storage.owner(of: "alice") == nil)
    let applied = try await instances.b.send(.append(2), to: "alice", reading: { $0.applied })
    #expect(applied == [1, 2])
    await instances.shutdown()
  }

  @Test func afterTheLeaseExpiresAnotherInstanceTakesOverAndTheStaleOwnersSaveIsRefused()
    async throws
  {
    let instances = TwoInstances()
    try await instances.a.send(.append(1), to: "alice")
    let tokenOfA = instances.storage.token(of: "alice")
    // Node A stops renewing (as if partitioned); its lease expires on the storage's time.
    await instances.time.advance(by: .seconds(11))
    let applied = try await instances.b.send(.append(2), to: "alice", reading: { $0.applied })
    #expect(applied == [1, 2])
    #expect(instances.storage.token(of: "alice") > tokenOfA)
    // A still has a live store for the key; its save carries the stale token and is refused.
    let error = await #expect(throws: SessionError.self) {
      try await instances.a.send(.append(3), to: "alice")
    }
    guard case .ownershipLost(let key, let message) = error else {
      Issue.record("expected .ownershipLost, got \(String(describing: error))")
      return
    }
    #expect(key == "alice")
    #expect(message.contains("node-b"))
    #expect(instances.storage.storedState(for: "alice")?.applied == [1, 2])
    // A shut that store down: a later send is refused at once, naming the owner.
    let later = await #expect(throws: SessionError.self) {
      try await instances.a.send(.append(4), to: "alice")
    }
    #expect(later?.message.contains("node-b") == true)
    #expect(instances.storage.storedState(for: "alice")?.applied == [1, 2])
    await instances.shutdown()
  }

  @Test func aStorageFailureFailsTheSendNamingTheKeyAndTheErrorAndLosesNothingAcknowledged()
    async throws
  {
    let instances = TwoInstances()
    try await instances.a.send(.append(1), to: "alice")
    instances.storage.failOperations(with: DiskFull())
    let error = await #expect(throws: SessionError.self) {
      try await instances.a.send(.append(2), to: "alice")
    }
    guard case .storageFailed(let key, let message) = error else {
      Issue.record("expected .storageFailed, got \(String(describing: error))")
      return
    }
    #expect(key == "alice")
    #expect(message.contains("disk full"))
    #expect(instances.storage.storedState(for: "alice")?.applied == [1])
    let activation = await #expect(throws: SessionError.self) {
      try await instances.a.send(.append(1), to: "bob")
    }
    #expect(activation?.key == "bob")
    #expect(activation?.message.contains("disk full") == true)
    // The database comes back. The store that held the unsaved 2 was discarded (memory never
    // keeps what storage refused): the next send starts from the last saved state.
    instances.storage.failOperations(with: nil)
    try await instances.a.send(.append(3), to: "alice")
    #expect(instances.storage.storedState(for: "alice")?.applied == [1, 3])
    try await instances.a.send(.append(1), to: "bob")
    await instances.shutdown()
  }

  @Test func storedStateThatNoLongerReadsFailsTheKeysSendsAndIsNotOverwritten() async throws {
    let instances = TwoInstances()
    instances.storage.store(SessionLedger.State(key: "alice", applied: [7]), for: "alice")
    instances.storage.makeUnreadable("alice")
    let error = await #expect(throws: SessionError.self) {
      try await instances.a.send(.append(1), to: "alice")
    }
    guard case .stateUnreadable(let key, _, let message) = error else {
      Issue.record("expected .stateUnreadable, got \(String(describing: error))")
      return
    }
    #expect(key == "alice")
    #expect(message.contains("no longer decodes"))
    #expect(instances.storage.storedState(for: "alice")?.applied == [7])
    #expect(instances.a.liveCount == 0)
    // Other keys are served.
    try await instances.a.send(.append(1), to: "bob")
    await instances.shutdown()
  }

  @Test func twoInstancesUnderOneOwnerNameFenceEachOtherAndLoseNothingAcknowledged()
    async throws
  {
    // A misconfiguration a deploy can make (every replica given the same `--owner`): the twin's
    // acquisition must still be a new lease, or both stores save under one token.
    let instances = TwoInstances()
    let twin = TwoInstances.registry("node-a", instances.storage)
    try await instances.a.send(.append(1), to: "alice")
    let first = instances.storage.token(of: "alice")
    let taken = try await twin.send(.append(2), to: "alice", reading: { $0.applied })
    #expect(taken == [1, 2])
    #expect(instances.storage.token(of: "alice") > first)
    // A's store still reads [1]: its save carries the old token and is refused.
    let error = await #expect(throws: SessionError.self) {
      try await instances.a.send(.append(3), to: "alice")
    }
    guard case .ownershipLost(_, let message) = error else {
      Issue.record("expected .ownershipLost, got \(String(describing: error))")
      return
    }
    #expect(message.contains("this instance's own owner name"))
    #expect(instances.storage.storedState(for: "alice")?.applied == [1, 2])
    // A send asks the storage again: A takes the key back with every acknowledged action.
    let back = try await instances.a.send(.append(4), to: "alice", reading: { $0.applied })
    #expect(back == [1, 2, 4])
    await #expect(throws: SessionError.self) { try await twin.send(.append(5), to: "alice") }
    #expect(instances.storage.storedState(for: "alice")?.applied == [1, 2, 4])
    await twin.shutdown(gracePeriod: .seconds(1))
    await instances.shutdown()
  }

  @Test func aKeyErasedAndTakenAgainNeverRepeatsATokenAnEarlierActivationHolds() async throws {
    // The erased row takes its tokens with it: a row made afresh must not start where the first
    // did, or a store still live from before the erasure (a paused process, a second instance
    // under the same name) saves its old state over the new one.
    let instances = TwoInstances()
    let twin = TwoInstances.registry("node-a", instances.storage)
    try await twin.send(.append(1), to: "alice")
    let before = instances.storage.token(of: "alice")
    try await instances.a.erase("alice")
    #expect(instances.storage.storedState(for: "alice") == nil)
    let fresh = try await instances.a.send(.append(2), to: "alice", reading: { $0.applied })
    #expect(fresh == [2])
    #expect(instances.storage.token(of: "alice") != before)
    await #expect(throws: SessionError.self) { try await twin.send(.append(3), to: "alice") }
    #expect(instances.storage.storedState(for: "alice")?.applied == [2])
    await twin.shutdown(gracePeriod: .seconds(1))
    #expect(instances.storage.storedState(for: "alice")?.applied == [2])
    await instances.shutdown()
  }

  @Test func shutdownSavesEveryStoreAndReleasesItsLease() async throws {
    let instances = TwoInstances()
    for index in 0..<20 { try await instances.a.send(.append(index), to: "k\(index)") }
    await instances.a.shutdown(gracePeriod: .seconds(1))
    for index in 0..<20 {
      #expect(instances.storage.storedState(for: "k\(index)")?.applied == [index])
      #expect(instances.storage.owner(of: "k\(index)") == nil)
    }
    await instances.b.shutdown(gracePeriod: .seconds(1))
  }
}

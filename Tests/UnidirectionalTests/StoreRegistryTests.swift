import Testing
import Unidirectional

/// A session that records what it applied, with an idle timer and a save that waits on a gate.
struct SessionLedger: Reducer {
  struct State: Equatable, Sendable {
    var key: String
    var applied: [Int] = []
    var saves = 0
  }

  enum Action: Sendable {
    case append(Int)
    case arm
    case idle
    case save
    case saved
  }

  enum CancelID { case idle }

  let clock: any Clock<Duration>
  let gate: Gate

  func reduce(into state: inout State, action: Action) -> Effect<Action> {
    switch action {
    case .append(let value):
      state.applied.append(value)
      return .none
    case .arm:
      return .send(.idle, after: .seconds(60), clock: self.clock)
        .cancellable(id: CancelID.idle, cancelInFlight: true)
        .cancelledOnShutdown()
    case .idle:
      state.applied.append(-1)
      return .none
    case .save:
      return .run { [gate] send in
        await gate.wait()
        await send(.saved)
      }
    case .saved:
      state.saves += 1
      return .none
    }
  }
}

/// Opens once; waiters before and after go through.
final class Gate: Sendable {
  private struct Contents {
    var open = false
    var waiters: [CheckedContinuation<Void, Never>] = []
    var watchers: [CheckedContinuation<Void, Never>] = []
  }
  private let state = LockIsolated(Contents())

  func wait() async {
    await withCheckedContinuation { continuation in
      let (open, watchers) = self.state.withValue { state in
        if state.open { return (true, [CheckedContinuation<Void, Never>]()) }
        state.waiters.append(continuation)
        defer { state.watchers = [] }
        return (false, state.watchers)
      }
      if open { continuation.resume() }
      for watcher in watchers { watcher.resume() }
    }
  }

  /// Suspends until something waits at the gate.
  func untilSomethingWaits() async {
    await withCheckedContinuation { continuation in
      let waiting = self.state.withValue { state -> Bool in
        if !state.waiters.isEmpty { return true }
        state.watchers.append(continuation)
        return false
      }
      if waiting { continuation.resume() }
    }
  }

  func open() {
    let waiters = self.state.withValue { state in
      state.open = true
      defer { state.waiters = [] }
      return state.waiters
    }
    for waiter in waiters { waiter.resume() }
  }
}

private func makeRegistry(
  storage: InMemorySessionStorage<String, SessionLedger.State>? = nil,
  owner: String? = nil,
  idleTimeout: Duration? = nil,
  capacity: Int? = nil,
  clock: any Clock<Duration>,
  gate: Gate = Gate()
) -> StoreRegistry<String, SessionLedger> {
  StoreRegistry(
    storage: storage,
    owner: owner,
    idleTimeout: idleTimeout,
    capacity: capacity,
    clock: clock
  ) { key in
    SessionLedger.State(key: key)
  } reducer: {
    SessionLedger(clock: clock, gate: gate)
  }
}

@Suite(.timeLimit(.minutes(1))) struct StoreRegistryTests {
  @Test func aFirstSendActivatesTheKeysStoreAndLaterSendsReachTheSameOne() async throws {
    let registry = makeRegistry(clock: TestClock())
    #expect(registry.liveCount == 0)
    #expect(await registry.liveStore(for: "alice") == nil)
    try await registry.send(.append(1), to: "alice")
    let applied = try await registry.send(.append(2), to: "alice", reading: { $0.applied })
    #expect(applied == [1, 2])
    #expect(registry.liveCount == 1)
    let store = try #require(await registry.liveStore(for: "alice"))
    #expect(await store.state.key == "alice")
    try await registry.send(.append(7), to: "bob")
    #expect(registry.liveCount == 2)
    await registry.shutdown(gracePeriod: .seconds(1))
  }

  @Test func anIdleStorePassivatesAfterTheTimeoutAndEveryActionRestartsIt() async throws {
    let clock = TestClock()
    let registry = makeRegistry(idleTimeout: .seconds(300), clock: clock)
    try await registry.send(.append(1), to: "alice")
    await clock.advance(by: .seconds(200))
    try await registry.send(.append(2), to: "alice")
    await clock.advance(by: .seconds(200))
    // 400 s since activation, 200 s since the last action: still live.
    #expect(registry.liveCount == 1)
    #expect(await registry.liveStore(for: "alice") != nil)
    await clock.advance(by: .seconds(100))
    // 300 s idle: passivating (not live) at once, on the clock's advance.
    #expect(registry.liveCount == 0)
    #expect(await registry.liveStore(for: "alice") == nil)
    // A send waits for the passivation and goes to a new store (no storage: a fresh state).
    let applied = try await registry.send(.append(3), to: "alice", reading: { $0.applied })
    #expect(applied == [3])
    await registry.shutdown(gracePeriod: .seconds(1))
  }

  @Test func anArmedIdleTimerKeepsNeitherADroppedRegistryNorItsStoresAlive() async throws {
    let clock = TestClock()
    var registry: StoreRegistry<String, SessionLedger>? = makeRegistry(
      idleTimeout: .seconds(300),
      clock: clock
    )
    try await registry?.send(.append(1), to: "alice")
    weak let store = await registry?.liveStore(for: "alice")
    #expect(store != nil)
    weak let dropped = registry
    registry = nil
    #expect(dropped == nil)
    // Its idle timer left the clock's queue with it, and let go of the store.
    #expect(store == nil)
    await clock.advance(by: .seconds(300))
    #expect(dropped == nil)
  }

  @Test func atCapacityTheLeastRecentlyUsedStorePassivatesFirst() async throws {
    let registry = makeRegistry(capacity: 2, clock: TestClock())
    try await registry.send(.append(1), to: "a")
    try await registry.send(.append(1), to: "b")
    try await registry.send(.append(2), to: "a")  // "b" is now the least recently used
    try await registry.send(.append(1), to: "c")
    #expect(registry.liveCount == 2)
    #expect(await registry.liveStore(for: "a") != nil)
    #expect(await registry.liveStore(for: "b") == nil)
    #expect(await registry.liveStore(for: "c") != nil)
    await registry.shutdown(gracePeriod: .seconds(1))
  }

  @Test func atCapacityEvictionsFollowTheLeastRecentlyUsedOrderExactlyOverManySends()
    async throws
  {
    // Evictions take their victims from the oldest part kept at a pass over the live stores:
    // against a model of the exact order, over sends that touch kept entries between passes.
    let capacity = 64
    let registry = makeRegistry(capacity: capacity, clock: TestClock())
    var generator = SplitMix64(state: 0x5eed)
    var order: [String] = []  // least recently used first
    for step in 0..<3_000 {
      // NB: mostly a few hot keys, so kept entries are touched before they are evicted.
      let hot = generator.next() % 2 == 0
      let key = "k\(generator.next() % (hot ? 40 : 400))"
      try await registry.send(.append(step), to: key)
      order.removeAll { $0 == key }
      order.append(key)
      if order.count > capacity { order.removeFirst(order.count - capacity) }
      guard step % 97 == 0 || step > 2_900 else { continue }
      #expect(registry.liveCount == order.count)
      let oldest = try #require(order.first)
      #expect(await registry.liveStore(for: oldest) != nil, "step \(step)")
    }
    for key in (0..<400).map({ "k\($0)" }) {
      let live = await registry.liveStore(for: key) != nil
      #expect(live == order.contains(key), "\(key)")
    }
    await registry.shutdown(gracePeriod: .seconds(1))
  }

  @Test func storesPassivatedBelowCapacityAreNotKeptForALaterEviction() async throws {
    let clock = TestClock()
    let registry = makeRegistry(idleTimeout: .seconds(300), capacity: 16, clock: clock)
    for index in 0...16 { try await registry.send(.append(index), to: "k\(index)") }
    // The eviction of k0 kept the next oldest for the evictions after it.
    weak let oldest = await registry.liveStore(for: "k1")
    #expect(oldest != nil)
    await clock.advance(by: .seconds(300))
    #expect(registry.liveCount == 0)
    // NB: each send waits for its key's passivation to end, then activates a new store.
    for index in 1...16 { try await registry.send(.append(0), to: "k\(index)") }
    #expect(registry.liveCount == 16)
    #expect(oldest == nil)
    await registry.shutdown(gracePeriod: .seconds(1))
  }

  @Test func anEffectsActionAlsoCountsAsUse() async throws {
    let gate = Gate()
    let registry = makeRegistry(capacity: 2, clock: TestClock(), gate: gate)
    try await registry.send(.save, to: "a")
    try await registry.send(.append(1), to: "b")
    let store = try #require(await registry.liveStore(for: "a"))
    gate.open()
    for await state in store.states where state.saves == 1 { break }
    try await registry.send(.append(1), to: "c")
    #expect(await registry.liveStore(for: "a") != nil)
    #expect(await registry.liveStore(for: "b") == nil)
    await registry.shutdown(gracePeriod: .seconds(1))
  }

  @Test func passivateShutsTheStoreDownGracefullyAndASendReactivatesIt() async throws {
    let storage = InMemorySessionStorage<String, SessionLedger.State>(clock: TestClock())
    let gate = Gate()
    let registry = makeRegistry(storage: storage, owner: "a", clock: TestClock(), gate: gate)
    try await registry.send(.append(1), to: "k")
    try await registry.send(.arm, to: "k")
    try await registry.send(.save, to: "k")
    await gate.untilSomethingWaits()
    let passivation = Task { try await registry.passivate("k") }
    // The save holds the passivation (unmarked), and its action is still reduced; the idle timer
    // (marked) does not hold it, and never fires.
    gate.open()
    try await passivation.value
    #expect(storage.storedState(for: "k")?.applied == [1])
    #expect(storage.storedState(for: "k")?.saves == 1)
    #expect(storage.owner(of: "k") == nil)
    let applied = try await registry.send(.append(2), to: "k", reading: { $0.applied })
    #expect(applied == [1, 2])
    await registry.shutdown(gracePeriod: .seconds(1))
  }

  @Test func theRegistrysObserverAndDependenciesApplyToEveryStoreItMakes() async throws {
    struct KeyedLog: StoreObserver {
      typealias State = SessionLedger.State
      typealias Action = SessionLedger.Action
      let key: String
      let log: LockIsolated<[String]>
      func actionReduced(_ action: Action, origin: ActionOrigin) {
        self.log.withValue { $0.append("\(self.key): \(action)") }
      }
      func storeShutDown() {
        self.log.withValue { $0.append("\(self.key): shut down") }
      }
    }
    let log = LockIsolated<[String]>([])
    let clock = TestClock()
    let registry = StoreRegistry(
      clock: clock,
      observer: { key in KeyedLog(key: key, log: log) }
    ) { key in
      SessionLedger.State(key: key)
    } reducer: {
      @Dependency(\.continuousClock) var clock
      return SessionLedger(clock: clock, gate: Gate())
    } withDependencies: {
      $0.continuousClock = clock
    }
    try await registry.send(.append(1), to: "a")
    try await registry.send(.arm, to: "b")
    // The reducer got the registry's clock: its 60 s timer fires when the test clock says so.
    await clock.advance(by: .seconds(60))
    let store = try #require(await registry.liveStore(for: "b"))
    #expect(await store.state.applied == [-1])
    try await registry.passivate("a")
    #expect(log.value.contains("a: append(1)"))
    #expect(log.value.contains("b: idle"))
    #expect(log.value.contains("a: shut down"))
    await registry.shutdown(gracePeriod: .seconds(1))
    #expect(log.value.contains("b: shut down"))
  }

  @Test func sendsAfterShutdownThrowShutDownNamingTheKey() async throws {
    let registry = makeRegistry(clock: TestClock())
    try await registry.send(.append(1), to: "alice")
    await registry.shutdown(gracePeriod: .seconds(1))
    #expect(registry.liveCount == 0)
    let error = await #expect(throws: SessionError.self) {
      try await registry.send(.append(2), to: "alice")
    }
    guard case .shutDown(let key, _) = error else {
      Issue.record("expected .shutDown, got \(String(describing: error))")
      return
    }
    #expect(key == "alice")
    #expect(error?.description.contains("alice") == true)
  }

  @Test func sendAndReadAndStateOfAKeyTakeTheLiveStoreAndFallBackWhenItIsGone() async throws {
    let gate = Gate()
    let registry = makeRegistry(clock: TestClock(), gate: gate)
    try await registry.send(.append(1), to: "alice")
    // A live key: the read sees the action's state, and the effect it returned starts.
    let saves = try await registry.send(.save, to: "alice", reading: { $0.saves })
    #expect(saves == 0)
    await gate.untilSomethingWaits()
    gate.open()
    let store = try #require(await registry.liveStore(for: "alice"))
    for await state in store.states where state.saves == 1 { break }
    // A passivated key: the read reactivates it.
    try await registry.passivate("alice")
    #expect(await registry.liveStore(for: "alice") == nil)
    let applied = try await registry.send(.append(2), to: "alice", reading: { $0.applied })
    #expect(applied == [2])
    // Reading alone: a live key, then a passivated one, which the read activates.
    #expect(try await registry.state(of: "alice").applied == [2])
    try await registry.passivate("alice")
    #expect(try await registry.state(of: "alice").applied == [])
    #expect(await registry.liveStore(for: "alice") != nil)
    // A registry that shut down: the read throws, naming the key.
    await registry.shutdown(gracePeriod: .seconds(1))
    await #expect(throws: SessionError.self) { try await registry.state(of: "alice") }
    let error = await #expect(throws: SessionError.self) {
      try await registry.send(.append(3), to: "alice", reading: { $0.applied })
    }
    guard case .shutDown(let key, _) = error else {
      Issue.record("expected .shutDown, got \(String(describing: error))")
      return
    }
    #expect(key == "alice")
  }

  @Test func shutdownCancelsMarkedTimersAndWaitsOnlyForUnmarkedSaves() async throws {
    let gate = Gate()
    let clock = TestClock()
    let registry = makeRegistry(clock: clock, gate: gate)
    for index in 0..<1_000 {
      try await registry.send(.arm, to: "\(index)")
      try await registry.send(.save, to: "\(index)")
    }
    #expect(registry.liveCount == 1_000)
    let stores = await (0..<1_000).asyncMap { await registry.liveStore(for: "\($0)")! }
    let shutdown = Task { await registry.shutdown(gracePeriod: .seconds(10)) }
    // The clock never moves: had a marked timer or the grace period held the shutdown, it would
    // never return. The saves finish once the gate opens.
    gate.open()
    await shutdown.value
    #expect(clock.sleeperCount == 0)
    for store in stores {
      let state = await store.state
      #expect(state.saves == 1)
      #expect(state.applied.isEmpty)
    }
  }

  @Test func twoSavesInFlightNeverCarryOneKeyAndAKeyInFlightWaitsForTheNextBatch() async throws {
    let storage = InMemorySessionStorage<String, SessionLedger.State>(clock: TestClock())
    let gated = GatedStorage(storage, concurrentSaves: 2)
    let registry = StoreRegistry(storage: gated, owner: "a", clock: TestClock()) { key in
      SessionLedger.State(key: key)
    } reducer: {
      SessionLedger(clock: ContinuousClock(), gate: Gate())
    }
    try await registry.send(.append(0), to: "k0")
    try await registry.send(.append(0), to: "k1")
    gated.hold()
    let first = Task { try await registry.send(.append(1), to: "k0") }
    await gated.waitUntilHeld(1)
    // Another key takes the second save in flight.
    let second = Task { try await registry.send(.append(1), to: "k1") }
    await gated.waitUntilHeld(2)
    // The first key again, while its save is in flight: it waits for the next batch.
    let third = Task { try await registry.send(.append(2), to: "k0") }
    await registry.waitUntilSavesQueued(1)
    gated.release()
    _ = try await (first.value, second.value, third.value)
    #expect(registry.saveStatistics == SaveStatistics(saves: 5, states: 5, sends: 5))
    #expect(storage.storedState(for: "k0")?.applied == [0, 1, 2])
    #expect(storage.storedState(for: "k1")?.applied == [0, 1])
    await registry.shutdown(gracePeriod: .seconds(1))
  }

  @Test func aSendWaitsForItsStatesSaveAndManyWaitingSendsShareOneSave() async throws {
    let storage = InMemorySessionStorage<String, SessionLedger.State>(clock: TestClock())
    let gated = GatedStorage(storage)
    let registry = StoreRegistry(storage: gated, owner: "a", clock: TestClock()) { key in
      SessionLedger.State(key: key)
    } reducer: {
      SessionLedger(clock: ContinuousClock(), gate: Gate())
    }
    try await registry.send(.append(0), to: "k0")
    #expect(storage.storedState(for: "k0")?.applied == [0])
    #expect(storage.saveCount == 1)
    // Hold the next save in flight; 50 sends to 10 keys queue behind it, then share one save.
    gated.hold()
    let first = Task { try await registry.send(.append(1), to: "k0") }
    await gated.waitUntilHeld()
    try await withThrowingTaskGroup(of: Void.self) { group in
      for index in 0..<50 {
        group.addTask { try await registry.send(.append(index), to: "k\(index % 10)") }
      }
      await registry.waitUntilSavesQueued(50)
      let savesBefore = storage.saveCount
      gated.release()
      try await group.waitForAll()
      // The held save, then one save for all 50 waiting sends (10 keys).
      #expect(storage.saveCount == savesBefore + 2)
    }
    _ = try await first.value
    // The statistics say so: the first save, the held one, then 10 states for 50 sends.
    #expect(registry.saveStatistics == SaveStatistics(saves: 3, states: 12, sends: 52))
    #expect(registry.saveStatistics.meanBatchSize == 4)
    #expect(storage.storedState(for: "k3")?.applied.sorted() == [3, 13, 23, 33, 43])
    #expect(storage.storedState(for: "k0")?.applied.sorted() == [0, 0, 1, 10, 20, 30, 40])
    await registry.shutdown(gracePeriod: .seconds(1))
  }
}

extension Sequence where Element: Sendable {
  func asyncMap<T>(_ transform: (Element) async -> T) async -> [T] {
    var results: [T] = []
    for element in self { results.append(await transform(element)) }
    return results
  }
}

/// A storage whose saves can be held in flight (to make sends queue behind one).
final class GatedStorage<Key: Hashable & Sendable, State: Sendable>: PassThroughStorage {
  let base: InMemorySessionStorage<Key, State>
  private struct Contents {
    var holding = false
    var held: [CheckedContinuation<Void, Never>] = []
    var watchers: [CheckedContinuation<Void, Never>] = []
  }
  private let gate = LockIsolated(Contents())

  let concurrentSaves: Int

  init(_ base: InMemorySessionStorage<Key, State>, concurrentSaves: Int = 1) {
    self.base = base
    self.concurrentSaves = concurrentSaves
  }

  func hold() { self.gate.withValue { $0.holding = true } }

  /// Returns once `count` saves are held (each held save wakes the watchers to check).
  func waitUntilHeld(_ count: Int = 1) async {
    while !self.gate.withValue({ $0.held.count >= count }) {
      await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
        let held = self.gate.withValue { gate -> Bool in
          if gate.held.count >= count { return true }
          gate.watchers.append(continuation)
          return false
        }
        if held { continuation.resume() }
      }
    }
  }

  func release() {
    let held = self.gate.withValue { gate in
      gate.holding = false
      defer { gate.held = [] }
      return gate.held
    }
    for continuation in held { continuation.resume() }
  }

  func save(
    _ writes: [SessionWrite<Key, State>],
    owner: String
  ) async throws
    -> [SessionSaveResult]
  {
    await self.passGate()
    return try await self.base.save(writes, owner: owner)
  }

  /// Returns at once, or once ``release()`` is called while the gate holds saves.
  func passGate() async {
    await withCheckedContinuation { continuation in
      let (held, watchers) = self.gate.withValue { gate in
        guard gate.holding else { return (false, [CheckedContinuation<Void, Never>]()) }
        gate.held.append(continuation)
        defer { gate.watchers = [] }
        return (true, gate.watchers)
      }
      if !held { continuation.resume() }
      for watcher in watchers { watcher.resume() }
    }
  }

}

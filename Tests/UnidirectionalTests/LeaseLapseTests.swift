import Testing
import Unidirectional

private typealias LedgerStorage = InMemorySessionStorage<String, SessionLedger.State>

/// An instance that cannot renew its leases stops reading its stores' states once its leases may
/// have expired: another instance may own those keys by then.
@Suite(.timeLimit(.minutes(1))) struct LeaseLapseTests {
  @Test func aStoreWhoseLeaseCouldNotBeRenewedIsNotReadOnceTheLeaseMayHaveExpired() async throws {
    let time = TestClock()
    let storage = Self.storage(on: time)
    // Node A reaches the database for everything but its renewals (as in a partition that
    // began after it took its leases, or a pause): its leases expire on the storage's time.
    let a = ledgerRegistry("node-a", RenewalsFail(base: storage), time)
    let b = ledgerRegistry("node-b", storage, time)
    try await a.send(.append(1), to: "alice")
    try await a.send(.append(1), to: "bob")
    try await a.send(.append(1), to: "carol", idempotencyKey: "first")
    await time.advance(by: .seconds(8))
    #expect(try await a.state(of: "alice").applied == [1])

    await time.advance(by: .seconds(3))
    try await b.send(.append(2), to: "alice")
    // A's store still holds [1]; reading it would answer a state node B has moved on from.
    let error = await #expect(throws: SessionError.self) {
      _ = try await a.state(of: "alice")
    }
    guard case .ownershipLost(let key, let message) = error else {
      Issue.record("expected .ownershipLost, got \(String(describing: error))")
      return
    }
    #expect(key == "alice")
    #expect(message.contains("node-b"))
    let stream = await #expect(throws: SessionError.self) {
      _ = try await a.activatedStore(for: "alice")
    }
    #expect(stream?.message.contains("node-b") == true)
    // Nor does a retry answer it.
    try await b.send(.append(2), to: "carol")
    let retry = await #expect(throws: SessionError.self) {
      _ = try await a.send(.append(1), to: "carol", idempotencyKey: "first", reading: { $0 })
    }
    #expect(retry?.message.contains("node-b") == true)
    // A key nobody took over is read again from storage, under a lease taken anew.
    let bob = try await a.state(of: "bob")
    #expect(bob.applied == [1])
    #expect(await a.liveStore(for: "bob") != nil)
    #expect(storage.owner(of: "bob") == "node-a")
    await a.shutdown(gracePeriod: .seconds(1))
    await b.shutdown(gracePeriod: .seconds(1))
  }

  @Test func storesWhoseLeasesAreRenewedAreReadPastTheLeasesFirstLength() async throws {
    let time = TestClock()
    let storage = Self.storage(on: time)
    let renewals = RenewalsCounted(base: storage)
    let a = ledgerRegistry("node-a", renewals, time)
    try await a.send(.append(1), to: "alice")
    let store = await a.liveStore(for: "alice")
    // Renewals every third of the lease; the second begins only once the first has been counted.
    await time.advance(by: .milliseconds(3_400))
    await renewals.wait(for: 1)
    await time.advance(by: .milliseconds(3_400))
    await renewals.wait(for: 2)
    await time.advance(by: .seconds(3))
    #expect(try await a.state(of: "alice").applied == [1])
    #expect(await a.liveStore(for: "alice") === store)
    await a.shutdown(gracePeriod: .seconds(1))
  }

  @Test func aFailedRenewalDiscardsTheStoresWhoseLeasesRanOutSoTheirStreamsEnd() async throws {
    let time = TestClock()
    let (a, _, passivations, stream) = try await Self.streamingAlice(
      { RenewalsFail(base: $0) },
      time
    )
    var states = stream
    // Renewals at 3.3 s and 6.7 s fail, the lease still counted on; the one at 10 s fails past
    // 9 s, and the store is discarded with no read to find it.
    await time.advance(by: .seconds(10))
    var reasons = passivations.makeAsyncIterator()
    #expect(await reasons.next() == .discarded)
    #expect(await states.next() == nil)
    #expect(await a.liveStore(for: "alice") == nil)
    await a.shutdown(gracePeriod: .seconds(1))
  }

  @Test func aRenewalStorageNeverAnswersStillEndsTheStreamsOfStoresWhoseLeasesRanOut() async throws
  {
    let time = TestClock()
    let (silence, lifted) = AsyncStream.makeStream(of: Never.self)
    let (a, store, passivations, stream) = try await Self.streamingAlice(
      { RenewalsUnanswered(base: $0, silence: silence) },
      time
    )
    var states = stream
    // The renewal at 3.3 s is never answered (a silent connection); the lease is counted on
    // until 9 s.
    await time.advance(by: .seconds(8))
    #expect(await a.liveStore(for: "alice") === store)
    // Past it, the store is discarded though the renewal is still out.
    await time.advance(by: .seconds(2))
    var reasons = passivations.makeAsyncIterator()
    #expect(await reasons.next() == .discarded)
    #expect(await states.next() == nil)
    #expect(await a.liveStore(for: "alice") == nil)
    lifted.finish()
    await a.shutdown(gracePeriod: .seconds(1))
  }

  @Test func aLongRenewalCountsEachSliceFromWhenItWasAskedFor() async throws {
    let time = TestClock()
    let (silence, lifted) = AsyncStream.makeStream(of: Never.self)
    let (passivations, passivated) = AsyncStream.makeStream(of: PassivationReason.self)
    let storage = FirstRenewalAnswered(base: Self.storage(on: time), silence: silence)
    let a = ledgerRegistry(
      "node-a",
      storage,
      time,
      observer: PassivationsHeard(continuation: passivated)
    )
    // One more key than a renewal's first slice holds.
    let count = storage.leasesPerRenewal + 1
    for index in 0..<count { try await a.send(.append(1), to: "k\(index)") }
    // The renewal at 3.3 s renews its first slice, and its second is never answered.
    await time.advance(by: .milliseconds(3_400))
    await storage.secondAsked()
    // At 10 s the second slice's lease (counted on until 9 s) may have run out, and its store is
    // discarded; the first slice's, renewed at 3.4 s, holds until 12.4 s. Counted from the
    // renewal's start and credited only at its end, every store was discarded here.
    await time.advance(by: .milliseconds(6_600))
    var reasons = passivations.makeAsyncIterator()
    #expect(await reasons.next() == .discarded)
    #expect(a.liveCount == count - 1)
    lifted.finish()
    await a.shutdown(gracePeriod: .seconds(1))
  }

  /// Node A over a database reached through `storage`, reporting its passivations, with alice
  /// live and her first state read from her store's stream.
  private static func streamingAlice<S: SessionStorage<String, SessionLedger.State>>(
    _ storage: (LedgerStorage) -> S,
    _ time: TestClock
  ) async throws -> (
    StoreRegistry<String, SessionLedger>,
    Store<SessionLedger.State, SessionLedger.Action>,
    AsyncStream<PassivationReason>,
    StoreStates<SessionLedger.State>.Iterator
  ) {
    let (passivations, passivated) = AsyncStream.makeStream(of: PassivationReason.self)
    let a = ledgerRegistry(
      "node-a",
      storage(Self.storage(on: time)),
      time,
      observer: PassivationsHeard(continuation: passivated)
    )
    try await a.send(.append(1), to: "alice")
    let store = try #require(await a.liveStore(for: "alice"))
    var states = store.states.makeAsyncIterator()
    #expect(await states.next()?.applied == [1])
    return (a, store, passivations, states)
  }

  /// A database whose leases last 10 s on `time`.
  private static func storage(on time: TestClock) -> LedgerStorage {
    InMemorySessionStorage(clock: time, leaseDuration: .seconds(10))
  }
}

/// A registry of ledgers named `owner` over `storage`, on `clock`.
private func ledgerRegistry(
  _ owner: String,
  _ storage: some SessionStorage<String, SessionLedger.State>,
  _ clock: any Clock<Duration>,
  observer: (any SessionRegistryObserver)? = nil
) -> StoreRegistry<String, SessionLedger> {
  StoreRegistry(storage: storage, owner: owner, clock: clock, registryObserver: observer) { key in
    SessionLedger.State(key: key)
  } reducer: {
    SessionLedger(clock: ContinuousClock(), gate: Gate())
  }
}

private struct Unreachable: Error {}

/// Hears each passivation's reason.
private struct PassivationsHeard: SessionRegistryObserver {
  let continuation: AsyncStream<PassivationReason>.Continuation

  func sessionPassivated(key: String, reason: PassivationReason) {
    self.continuation.yield(reason)
  }
}

/// A storage whose renewals fail.
private struct RenewalsFail: PassThroughStorage {
  let base: LedgerStorage

  func renew(_ leases: [SessionLease<String>], owner: String) async throws -> [String] {
    throw Unreachable()
  }
}

/// A storage whose renewals are not answered until `silence` ends (or the renewing task is
/// cancelled), and then fail.
private struct RenewalsUnanswered: PassThroughStorage {
  let base: LedgerStorage
  let silence: AsyncStream<Never>

  func renew(_ leases: [SessionLease<String>], owner: String) async throws -> [String] {
    for await _ in self.silence {}
    throw Unreachable()
  }
}

/// A storage that answers its first renewal and leaves the rest unanswered until `silence` ends.
private final class FirstRenewalAnswered: PassThroughStorage {
  let base: LedgerStorage
  let silence: AsyncStream<Never>
  private let state = LockIsolated((calls: 0, waiter: CheckedContinuation<Void, Never>?.none))

  init(base: LedgerStorage, silence: AsyncStream<Never>) {
    self.base = base
    self.silence = silence
  }

  func renew(_ leases: [SessionLease<String>], owner: String) async throws -> [String] {
    let (calls, waiter) = self.state.withValue { state in
      state.calls += 1
      defer { if state.calls == 2 { state.waiter = nil } }
      return (state.calls, state.calls == 2 ? state.waiter : nil)
    }
    guard calls == 1 else {
      waiter?.resume()
      for await _ in self.silence {}
      throw Unreachable()
    }
    return try await self.base.renew(leases, owner: owner)
  }

  /// Returns once a second renewal was asked for (the first, answered, counted).
  func secondAsked() async {
    await withCheckedContinuation { continuation in
      let done = self.state.withValue { state in
        if state.calls < 2 { state.waiter = continuation }
        return state.calls >= 2
      }
      if done { continuation.resume() }
    }
  }
}

/// A storage that counts its renewals, for a test to wait for one.
private final class RenewalsCounted: PassThroughStorage {
  let base: LedgerStorage
  private let count = LockIsolated(
    (renewals: 0, waiters: [(Int, CheckedContinuation<Void, Never>)]())
  )

  init(base: LedgerStorage) {
    self.base = base
  }

  func renew(_ leases: [SessionLease<String>], owner: String) async throws -> [String] {
    let lost = try await self.base.renew(leases, owner: owner)
    let ready = self.count.withValue { count in
      count.renewals += 1
      let ready = count.waiters.filter { $0.0 <= count.renewals }.map(\.1)
      count.waiters.removeAll { $0.0 <= count.renewals }
      return ready
    }
    for waiter in ready { waiter.resume() }
    return lost
  }

  /// How many renewals were answered so far.
  var renewals: Int { self.count.withValue { $0.renewals } }

  func wait(for renewals: Int) async {
    await withCheckedContinuation { continuation in
      let done = self.count.withValue { count in
        guard count.renewals < renewals else { return true }
        count.waiters.append((renewals, continuation))
        return false
      }
      if done { continuation.resume() }
    }
  }
}

/// Renewals run while the registry holds a key, and leave no sleep on its clock once none is
/// left: a test can run its `TestClock` to the end.
@Suite(.timeLimit(.minutes(1))) struct RenewalStopTests {
  @Test func aTestClockRunsToTheEndOnceTheLastKeyHasPassivatedAndRenewalsResumeWithTheNext()
    async throws
  {
    let time = TestClock()
    let storage = InMemorySessionStorage<String, SessionLedger.State>(
      clock: time,
      leaseDuration: .seconds(9)
    )
    let renewals = RenewalsCounted(base: storage)
    let registry = ledgerRegistry("node-a", renewals, time)
    try await registry.send(.append(1), to: "alice")
    try await registry.send(.append(1), to: "bob")
    await time.advance(by: .seconds(3))
    await renewals.wait(for: 1)
    try await registry.passivate("alice")
    #expect(await registry.liveStore(for: "bob") != nil)
    try await registry.passivate("bob")
    // Without the stop, the renewals' sleep stays (and `run()` would go on to its bound, an
    // issue): a registry that holds nothing must leave nothing waiting on its clock.
    #expect(time.sleeperCount == 0)
    await time.run()
    #expect(storage.storedState(for: "alice")?.applied == [1])
    #expect(storage.owner(of: "alice") == nil)

    try await registry.send(.append(2), to: "alice")
    await time.advance(by: .seconds(3))
    await renewals.wait(for: 2)
    #expect(storage.owner(of: "alice") == "node-a")
    await registry.shutdown(gracePeriod: .seconds(1))
  }
}

/// An `ImmediateClock` measures no time: a registry on one paces its renewals on the continuous
/// clock, so its renewal loop suspends between renewals instead of spinning on a thread.
@Suite(.timeLimit(.minutes(1))) struct ImmediateClockLeaseTests {
  @Test func aRegistryWithStorageOnAnImmediateClockRenewsOnlyAsRealTimePasses() async throws {
    // NB: a lease of ten minutes: no renewal is due while the test runs, however slow the
    // machine; a loop paced by the immediate clock renews without end.
    let renewals = RenewalsCounted(
      base: InMemorySessionStorage(leaseDuration: .seconds(600))
    )
    let registry = ledgerRegistry("node-a", renewals, ImmediateClock())
    for round in 0..<50 {
      try await registry.send(.append(round), to: "key-\(round % 5)")
    }
    #expect(
      try await registry.state(of: "key-1").applied == [1, 6, 11, 16, 21, 26, 31, 36, 41, 46]
    )
    #expect(renewals.renewals == 0)
    await registry.shutdown(gracePeriod: .seconds(1))
  }
}

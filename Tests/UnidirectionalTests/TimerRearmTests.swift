import Testing
import UnidirectionalTesting

@testable import Unidirectional

/// A timer re-armed under its identifier (`cancelInFlight: true`), from a send, from an effect of
/// the same send, or with a different shutdown mark.
private struct Rearming: Reducer {
  struct State: Equatable, Sendable {
    var fired: [Int] = []
  }

  enum Action: Equatable, Sendable {
    case arm(Int, markedForShutdown: Bool = false)
    case armThenRearmFromAnEffect
    case fired(Int)
  }

  enum CancelID: Hashable, Sendable { case idle }

  let clock: TestClock

  func reduce(into state: inout State, action: Action) -> Effect<Action> {
    switch action {
    case .arm(let value, let marked):
      let timer = Effect<Action>.send(.fired(value), after: .seconds(10), clock: self.clock)
        .cancellable(id: CancelID.idle, cancelInFlight: true)
      return marked ? timer.cancelledOnShutdown() : timer
    case .armThenRearmFromAnEffect:
      return .merge(
        .send(.fired(1), after: .seconds(10), clock: self.clock)
          .cancellable(id: CancelID.idle, cancelInFlight: true),
        .run { [clock] send in
          try await clock.sleep(for: .seconds(5))
          await send(.arm(2))
        }
      )
    case .fired(let value):
      state.fired.append(value)
      return .none
    }
  }
}

@Suite(.timeLimit(.minutes(1))) struct TimerRearmTests {
  private let key = CancelKey(Rearming.CancelID.idle, scope: nil)

  private func armed(in store: Store<Rearming.State, Rearming.Action>) -> [any EffectUnit] {
    store.core.supervisor?.units(under: self.key) ?? []
  }

  @Test func aReArmedTimerKeepsItsRecordAndMovesToTheReArmingSendsTask() async throws {
    let clock = TestClock()
    let store = Store(initialState: Rearming.State()) { Rearming(clock: clock) }
    let first = await store.send(.arm(1))
    let timer = try #require(self.armed(in: store).first)
    await clock.advance(by: .seconds(5))
    let second = await store.send(.arm(2))
    // One record, re-armed: no new unit, and one sleeper on the clock.
    #expect(self.armed(in: store).count == 1)
    #expect(self.armed(in: store).first === timer)
    #expect(clock.sleeperCount == 1)
    // The first send's effect was replaced: its task has finished, and cancelling it now does
    // nothing to the timer the second send owns.
    #expect(first.isFinished)
    #expect(!second.isFinished)
    #expect(first != second)
    first.cancel()
    await clock.advance(by: .seconds(9))
    #expect(await store.state.fired == [])
    await clock.advance(by: .seconds(1))
    #expect(await store.state.fired == [2])
    await second.finish()
    #expect(store.liveEffectCount == 0)
    #expect(store.registeredIdentifierCount == 0)
    await store.shutdown()
  }

  @Test func aReArmWhosePreviousTaskIsGoneReusesThatTasksToken() async throws {
    let clock = TestClock()
    let store = Store(initialState: Rearming.State()) { Rearming(clock: clock) }
    await store.send(.arm(1))
    let timer = try #require(self.armed(in: store).first as? TimerEntry)
    // The timer stood for the first send's lifetime: the first re-arm takes a token.
    await store.send(.arm(2))
    weak let token = timer.owner as AnyObject?
    #expect(token != nil && token !== timer)
    // Nothing holds that token now (the task was dropped): the next re-arm reuses it.
    await store.send(.arm(3))
    #expect(token != nil && timer.owner === token)
    // A task held meanwhile keeps its token: the re-arm after it takes a new one, and the held
    // task has finished.
    let held = await store.send(.arm(4))
    #expect(timer.owner === token)
    await store.send(.arm(5))
    #expect(timer.owner !== token)
    #expect(held.isFinished)
    held.cancel()
    await clock.advance(by: .seconds(10))
    #expect(await store.state.fired == [5])
    await store.shutdown()
  }

  /// The check that lets a re-arm keep its lifetime's record as it stands: `isKnownUniquelyReferenced`
  /// of the record's reference as an `AnyObject` answered `false` even for a lone reference, so
  /// every re-arm took the record out and put it back.
  @Test func aLifetimeRecordsOwnerKnowsWhetherItHoldsTheOnlyReferenceToItsToken() {
    var owner = LifetimeOwner(EffectToken(lifetime: nil))
    let alone = owner.isOnlyReferenceToToken()
    #expect(alone)
    let other = owner.unit
    let shared = owner.isOnlyReferenceToToken()
    #expect(!shared)
    withExtendedLifetime(other) {}
    #expect(owner.unit is EffectToken)
    // Another unit is never taken for a token.
    var timerOwner = LifetimeOwner(RunUnit(lifetime: nil))
    let timerAlone = timerOwner.isOnlyReferenceToToken()
    #expect(!timerAlone)
  }

  @Test func cancellingTheReArmingSendsTaskDisarmsTheTimer() async {
    let clock = TestClock()
    let store = Store(initialState: Rearming.State()) { Rearming(clock: clock) }
    await store.send(.arm(1))
    let second = await store.send(.arm(2))
    second.cancel()
    await second.finish()
    #expect(clock.sleeperCount == 0)
    #expect(store.liveEffectCount == 0)
    await clock.advance(by: .seconds(60))
    #expect(await store.state.fired == [])
    await store.shutdown()
  }

  @Test func aTimerReArmedByAnEffectOfItsOwnSendStaysInThatSendsTask() async throws {
    // On a manual executor, so each clock advance settles the effect it wakes.
    let clock = TestClock()
    let executor = ManualExecutor()
    let store = Store(
      initialState: Rearming.State(),
      reducer: Rearming(clock: clock),
      configuration: StoreConfiguration(executorPreference: executor)
    )
    defer { tearDown(store, on: executor) }
    let task = await executor.perform { await store.send(.armThenRearmFromAnEffect) }
    executor.drainUntilIdle()
    let timer = try #require(self.armed(in: store).first)
    await clock.advance(by: .seconds(5))
    // The effect's `.arm(2)` re-armed the timer in place, in the lifetime it already belongs to:
    // the send's task waits for it.
    #expect(await executor.perform { await store.state.fired } == [])
    #expect(self.armed(in: store).first === timer)
    #expect(!task.isFinished)
    await clock.advance(by: .seconds(9))
    #expect(await executor.perform { await store.state.fired } == [])
    #expect(!task.isFinished)
    await clock.advance(by: .seconds(1))
    #expect(await executor.perform { await store.state.fired } == [2])
    #expect(task.isFinished)
    #expect(store.liveEffectCount == 0)
  }

  @Test func aTimerWithAnotherShutdownMarkIsReplacedAndCarriesTheNewMark() async throws {
    let clock = TestClock()
    let store = Store(initialState: Rearming.State()) { Rearming(clock: clock) }
    await store.send(.arm(1))
    let unmarked = try #require(self.armed(in: store).first)
    await store.send(.arm(2, markedForShutdown: true))
    let marked = try #require(self.armed(in: store).first)
    #expect(marked !== unmarked)
    #expect(unmarked.isCancelled)
    #expect(marked.loadFlags() & UnitFlags.cancelledOnShutdown != 0)
    // Re-armed with the same mark, in place; the mark stays.
    await store.send(.arm(3, markedForShutdown: true))
    #expect(self.armed(in: store).first === marked)
    #expect(marked.loadFlags() & UnitFlags.cancelledOnShutdown != 0)
    await clock.advance(by: .seconds(10))
    #expect(await store.state.fired == [3])
    await store.shutdown()
  }

  @Test func aTimerThatFiredIsNotReArmedButReplaced() async throws {
    let clock = TestClock()
    let store = Store(initialState: Rearming.State()) { Rearming(clock: clock) }
    await store.send(.arm(1))
    let first = try #require(self.armed(in: store).first)
    await clock.advance(by: .seconds(10))
    #expect(await store.state.fired == [1])
    await store.send(.arm(2))
    #expect(self.armed(in: store).first !== first)
    await clock.advance(by: .seconds(10))
    #expect(await store.state.fired == [1, 2])
    await store.shutdown()
  }

  @Test func aHostRefusesToReArmWhatItDoesNotHold() async {
    // A disarmed entry, and an entry that fired, are not queued: re-arming them changes nothing.
    let clock = TestClock()
    let host: any TimerHost = clock
    let entry = TimerEntry(lifetime: nil, host: host, deadline: .seconds(1))
    #expect(!host.rearm(entry, deadline: .seconds(2), update: { _ in true }))
    host.arm(entry)
    #expect(!host.rearm(entry, deadline: .seconds(2), update: { _ in false }))
    #expect(host.rearm(entry, deadline: .seconds(2), update: { _ in true }))
    #expect(entry.deadline == .seconds(2))
    host.disarm(entry)
    #expect(!host.rearm(entry, deadline: .seconds(3), update: { _ in true }))
    #expect(clock.sleeperCount == 0)

    var queue = TimerQueue()
    let queued = TimerEntry(lifetime: nil, host: host, deadline: .seconds(5))
    let other = TimerEntry(lifetime: nil, host: host, deadline: .seconds(5))
    let missed = queue.reschedule(queued, to: .seconds(1))
    #expect(!missed)
    queue.insert(queued)
    queue.insert(other)
    // Moved to the same deadline as `other`, it now comes after it: re-arming is arming anew.
    let moved = queue.reschedule(queued, to: .seconds(5))
    #expect(moved)
    let firstOut = queue.popFirst()
    let secondOut = queue.popFirst()
    #expect(firstOut === other)
    #expect(secondOut === queued)
    let movedAfterPopping = queue.reschedule(queued, to: .seconds(1))
    #expect(!movedAfterPopping)
  }

  @Test func theShutdownMarkFoldsIntoATimerWithoutHidingWhereTheIdentifierWas() {
    let clock = TestClock()
    // The idle-timer pattern: identifier first, then the mark: one timer value, no wrapper.
    let marked = Effect<Int>.send(1, after: .seconds(1), clock: clock)
      .cancellable(id: "idle", cancelInFlight: true)
      .cancelledOnShutdown()
    guard case .timer(let timer, keyed: true, marked: true) = marked.operation else {
      Issue.record("not folded: \(marked.operation)")
      return
    }
    #expect(timer.cancelKey == CancelKey("idle", scope: nil))
    // The mark first: the identifier stays a wrapper, so its cancel-in-flight still runs while a
    // graceful shutdown refuses the marked timer (as it did before the fold).
    let markedFirst = Effect<Int>.send(1, after: .seconds(1), clock: clock)
      .cancelledOnShutdown()
      .cancellable(id: "idle", cancelInFlight: true)
    guard
      case .cancellable(_, cancelInFlight: true, let inner) = markedFirst.operation,
      case .timer(_, keyed: false, marked: true) = inner.operation
    else {
      Issue.record("unexpected shape: \(markedFirst.operation)")
      return
    }
    // Mapped through a parent, the mark stays.
    guard case .timer(_, keyed: true, marked: true) = marked.map({ "\($0)" }).operation else {
      Issue.record("the mark was lost in map")
      return
    }
  }

  @Test func aMarkedTimerReArmsInPlaceAndAGracefulShutdownStillCancelsItAtOnce() async {
    let clock = TestClock()
    let store = Store(initialState: 0) {
      Reduce<Int, Int> { state, action in
        state += action
        return action > 0
          ? .send(-1, after: .seconds(10), clock: clock)
            .cancellable(id: "idle", cancelInFlight: true)
            .cancelledOnShutdown()
          : .none
      }
    }
    let key = CancelKey("idle", scope: nil)
    await store.send(1)
    let first = store.core.supervisor?.units(under: key) ?? []
    await store.send(1)
    let second = store.core.supervisor?.units(under: key) ?? []
    #expect(first.count == 1)
    #expect(second.count == 1)
    #expect(first.first === second.first)
    #expect(clock.sleeperCount == 1)
    await store.shutdown(gracePeriod: .seconds(60), clock: clock)
    #expect(clock.sleeperCount == 0)
    #expect(await store.state == 2)
  }
}

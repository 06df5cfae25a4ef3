import Testing
import UnidirectionalTesting

@testable import Unidirectional

/// A search debounced as a `.run` (its body waits on the clock, so cancelling it while it runs is
/// observable), and the same search inside a parent (the debounced effect is mapped).
private struct Search: Reducer {
  struct State: Equatable, Sendable {
    var results: [String] = []
  }

  enum Action: Equatable, Sendable {
    case typed(String)
    case typedMarkedForShutdown(String)
    /// A marker first, then the debounced search: in a concatenation the debounce waits for its
    /// turn as a sleeping step.
    case typedAfterMarker(String)
    case cancel
    case results(String)
  }

  enum CancelID: Hashable, Sendable { case search }

  let clock: TestClock

  func reduce(into state: inout State, action: Action) -> Effect<Action> {
    switch action {
    case .typed(let query):
      return self.search(query)
    case .typedMarkedForShutdown(let query):
      return self.search(query).cancelledOnShutdown()
    case .typedAfterMarker(let query):
      return .concatenate(.send(.results("marker")), self.search(query))
    case .cancel:
      return .cancel(id: CancelID.search)
    case .results(let query):
      state.results.append(query)
      return .none
    }
  }

  private func search(_ query: String) -> Effect<Action> {
    .run { [clock] send in
      // The request takes a second.
      try await clock.sleep(for: .seconds(1))
      await send(.results(query))
    }
    .debounce(id: CancelID.search, for: .milliseconds(300), clock: self.clock)
  }
}

private struct Parent: Reducer {
  struct State: Equatable, Sendable {
    var child = Search.State()
  }

  enum Action: Equatable, Sendable {
    case child(Search.Action)
  }

  let clock: TestClock

  func reduce(into state: inout State, action: Action) -> Effect<Action> {
    switch action {
    case .child(let action):
      return Search(clock: self.clock).reduce(into: &state.child, action: action)
        .map { .child($0) }
    }
  }
}

/// A store on a manual executor: each clock advance settles the effects it starts.
private final class Harness<State: Sendable, Action: Sendable>: Sendable {
  let executor: ManualExecutor
  let store: Store<State, Action>

  init(_ executor: ManualExecutor, _ store: Store<State, Action>) {
    self.executor = executor
    self.store = store
  }

  deinit {
    tearDown(self.store, on: self.executor)
  }

  @discardableResult
  func send(_ action: Action) async -> StoreTask {
    let task = await self.executor.perform { [store] in await store.send(action) }
    self.executor.drainUntilIdle()
    return task
  }

  var state: State {
    get async { await self.executor.perform { [store] in await store.state } }
  }

  var supervisor: EffectSupervisor? { self.store.core.supervisor }
}

private func searchHarness(_ clock: TestClock) -> Harness<Search.State, Search.Action> {
  let executor = ManualExecutor()
  let store = Store(
    initialState: Search.State(),
    reducer: Search(clock: clock),
    configuration: StoreConfiguration(executorPreference: executor)
  )
  return Harness(executor, store)
}

@Suite(.timeLimit(.minutes(1))) struct DebounceTimerTests {
  @Test func aDebouncedRunIsATimerUntilItsDeadlineThenRunsOnlyTheLatestBody() async {
    let clock = TestClock()
    let harness = searchHarness(clock)
    for query in ["s", "sw", "swi"] {
      await harness.send(.typed(query))
      await clock.advance(by: .milliseconds(200))
      // One timer record re-armed by each keystroke; no task yet.
      #expect(harness.supervisor?.liveCount == 1)
      #expect(harness.supervisor?.liveTaskCount == 0)
      #expect(clock.sleeperCount == 1)
    }
    await clock.advance(by: .milliseconds(100))
    // The deadline came: the latest body runs, as a task, in the timer's place.
    #expect(harness.supervisor?.liveTaskCount == 1)
    #expect(harness.supervisor?.liveCount == 1)
    await clock.advance(by: .seconds(1))
    #expect(await harness.state.results == ["swi"])
    #expect(harness.supervisor?.liveCount == 0)
    #expect(harness.supervisor?.liveTaskCount == 0)
  }

  @Test func theSendsTaskCoversTheTimerAndThenTheBody() async {
    let clock = TestClock()
    let harness = searchHarness(clock)
    let first = await harness.send(.typed("a"))
    let second = await harness.send(.typed("ab"))
    // The second keystroke replaced the first one's effect.
    #expect(first.isFinished)
    #expect(!second.isFinished)
    await clock.advance(by: .milliseconds(300))
    #expect(!second.isFinished)
    await clock.advance(by: .seconds(1))
    #expect(second.isFinished)
    #expect(await harness.state.results == ["ab"])
  }

  @Test func cancellingWhileWaitingRunsNothing() async {
    let clock = TestClock()
    let harness = searchHarness(clock)
    await harness.send(.typed("a"))
    await harness.send(.cancel)
    #expect(clock.sleeperCount == 0)
    #expect(harness.supervisor?.liveCount == 0)
    await clock.advance(by: .seconds(5))
    #expect(await harness.state.results == [])
    #expect(harness.supervisor?.liveTaskCount == 0)
  }

  @Test func cancellingByIdentifierReachesTheBodyOnceItRuns() async {
    let clock = TestClock()
    let harness = searchHarness(clock)
    await harness.send(.typed("a"))
    await clock.advance(by: .milliseconds(300))
    #expect(harness.supervisor?.liveTaskCount == 1)
    await harness.send(.cancel)
    harness.executor.drainUntilIdle()
    #expect(harness.supervisor?.liveTaskCount == 0)
    await clock.advance(by: .seconds(5))
    #expect(await harness.state.results == [])
  }

  @Test func aNewKeystrokeCancelsTheRunningBodyAndWaitsAfresh() async {
    let clock = TestClock()
    let harness = searchHarness(clock)
    await harness.send(.typed("a"))
    await clock.advance(by: .milliseconds(300))
    #expect(harness.supervisor?.liveTaskCount == 1)
    await harness.send(.typed("ab"))
    harness.executor.drainUntilIdle()
    #expect(harness.supervisor?.liveTaskCount == 0)
    await clock.advance(by: .milliseconds(300))
    await clock.advance(by: .seconds(1))
    #expect(await harness.state.results == ["ab"])
  }

  @Test func aStoreShutDownWhileADebounceWaitsRunsNothing() async {
    let clock = TestClock()
    let harness = searchHarness(clock)
    await harness.send(.typed("a"))
    await harness.executor.perform { [store = harness.store] in await store.shutdown() }
    #expect(clock.sleeperCount == 0)
    await clock.advance(by: .seconds(5))
    #expect(harness.supervisor?.liveTaskCount ?? 0 == 0)
    #expect(harness.store.liveEffectCount == 0)
  }

  @Test func theBodyOfAMarkedDebounceIsMarkedToo() async throws {
    let clock = TestClock()
    let harness = searchHarness(clock)
    await harness.send(.typedMarkedForShutdown("a"))
    await clock.advance(by: .milliseconds(300))
    let key = CancelKey(Search.CancelID.search, scope: nil)
    let body = try #require(harness.supervisor?.units(under: key).first)
    #expect(body is RunJob<Search.Action>)
    #expect(body.loadFlags() & UnitFlags.cancelledOnShutdown != 0)
  }

  @Test func aDebouncedRunInAConcatenationWaitsAsAStepThenRuns() async {
    let clock = TestClock()
    let harness = searchHarness(clock)
    await harness.send(.typedAfterMarker("a"))
    #expect(await harness.state.results == ["marker"])
    // Inside an ordered effect the wait is a sleeping step of the concatenation's task.
    #expect(harness.supervisor?.liveTaskCount == 1)
    await clock.advance(by: .milliseconds(299))
    await clock.advance(by: .milliseconds(1))
    await clock.advance(by: .seconds(1))
    #expect(await harness.state.results == ["marker", "a"])
    #expect(harness.supervisor?.liveTaskCount == 0)
  }

  @Test func searchAsYouTypeInATestStore() async {
    // The Composable Architecture's search-as-you-type test, with a debounced `.run`.
    let clock = TestClock()
    let store = TestStore(initialState: Search.State()) { Search(clock: clock) }
    let first = await store.send(.typed("s"))
    await clock.advance(by: .milliseconds(200))
    await store.send(.typed("sw"))
    await first.finish()  // replaced by the second keystroke's effect
    await clock.advance(by: .milliseconds(300))
    await clock.advance(by: .seconds(1))
    await store.receive(.results("sw")) { $0.results = ["sw"] }
    await store.send(.typed("swi"))
    await clock.advance(by: .milliseconds(300))
    await store.send(.cancel)
    await clock.advance(by: .seconds(1))
  }

  @Test func aMappedDebouncedRunSendsTheParentsAction() async {
    let clock = TestClock()
    let executor = ManualExecutor()
    let harness = Harness(
      executor,
      Store(
        initialState: Parent.State(),
        reducer: Parent(clock: clock),
        configuration: StoreConfiguration(executorPreference: executor)
      )
    )
    await harness.send(.child(.typed("a")))
    await clock.advance(by: .milliseconds(100))
    await harness.send(.child(.typed("ab")))
    #expect(harness.supervisor?.liveCount == 1)
    await clock.advance(by: .milliseconds(300))
    await clock.advance(by: .seconds(1))
    #expect(await harness.state.child.results == ["ab"])
  }
}

/// Loading more while scrolling, throttled: the effect held back until the interval ends.
private struct Feed: Reducer {
  struct State: Equatable, Sendable {
    var loaded: [Int] = []
  }

  enum Action: Equatable, Sendable {
    case scrolled(Int)
    case stop
    case loaded(Int)
  }

  enum CancelID: Hashable, Sendable { case load }

  let clock: TestClock
  let latest: Bool

  func reduce(into state: inout State, action: Action) -> Effect<Action> {
    switch action {
    case .scrolled(let offset):
      return .run { send in await send(.loaded(offset)) }
        .throttle(id: CancelID.load, for: .seconds(1), clock: self.clock, latest: self.latest)
    case .stop:
      return .cancel(id: CancelID.load)
    case .loaded(let offset):
      state.loaded.append(offset)
      return .none
    }
  }
}

private func feedHarness(_ clock: TestClock, latest: Bool) -> Harness<Feed.State, Feed.Action> {
  let executor = ManualExecutor()
  let store = Store(
    initialState: Feed.State(),
    reducer: Feed(clock: clock, latest: latest),
    configuration: StoreConfiguration(executorPreference: executor)
  )
  return Harness(executor, store)
}

@Suite(.timeLimit(.minutes(1))) struct ThrottleTimerTests {
  @Test(arguments: [true, false])
  func theHeldEffectIsATimerUntilTheIntervalEnds(latest: Bool) async {
    let clock = TestClock()
    let harness = feedHarness(clock, latest: latest)
    await harness.send(.scrolled(1))
    #expect(await harness.state.loaded == [1])
    await clock.advance(by: .milliseconds(200))
    await harness.send(.scrolled(2))
    await clock.advance(by: .milliseconds(200))
    await harness.send(.scrolled(3))
    // Held back as one timer record on the clock: no task waits.
    #expect(clock.sleeperCount == 1)
    #expect(harness.supervisor?.liveTaskCount == 0)
    await clock.advance(by: .milliseconds(599))
    #expect(await harness.state.loaded == [1])
    await clock.advance(by: .milliseconds(1))
    #expect(await harness.state.loaded == [1, latest ? 3 : 2])
    #expect(harness.supervisor?.liveCount == 0)
    // The held effect's run started a new interval: the next one is held for a whole second.
    await harness.send(.scrolled(4))
    await clock.advance(by: .milliseconds(999))
    #expect(await harness.state.loaded == [1, latest ? 3 : 2])
    await clock.advance(by: .milliseconds(1))
    #expect(await harness.state.loaded == [1, latest ? 3 : 2, 4])
  }

  @Test func cancellingTheIdentifierCancelsTheHeldEffect() async {
    let clock = TestClock()
    let harness = feedHarness(clock, latest: true)
    await harness.send(.scrolled(1))
    await harness.send(.scrolled(2))
    #expect(clock.sleeperCount == 1)
    await harness.send(.stop)
    #expect(clock.sleeperCount == 0)
    #expect(harness.supervisor?.liveCount == 0)
    await clock.advance(by: .seconds(1))
    #expect(await harness.state.loaded == [1])
  }

  @Test(arguments: [true, false])
  func aCancelledHoldHoldsNothingBackOnceItIsAWholeIntervalOverdue(byTask: Bool) async {
    let clock = TestClock()
    let harness = feedHarness(clock, latest: false)
    await harness.send(.scrolled(1))
    let held = await harness.send(.scrolled(2))
    if byTask {
      held.cancel()
    } else {
      await harness.send(.stop)
    }
    // Within the next interval the cancelled hold still counts: a newer effect is dropped.
    await clock.advance(by: .milliseconds(1_500))
    await harness.send(.scrolled(3))
    #expect(await harness.state.loaded == [1])
    // A whole interval past its end, it holds nothing back: the next effect runs at once.
    await clock.advance(by: .milliseconds(500))
    await harness.send(.scrolled(4))
    #expect(await harness.state.loaded == [1, 4])
  }
}

import Testing
import Unidirectional
import UnidirectionalTesting

/// A session-like feature: an idle timer, a save that must finish, and effects that shut their own
/// store down.
struct ShutdownSession: Reducer {
  struct State: Equatable, Sendable {
    var log: [String] = []
    var total = 0
  }

  enum Action: Sendable {
    case touch
    case idle
    case save(seconds: Int)
    case saved
    case add(Int)
    case addTwice(Int)
    case shutDownFromEffect(graceful: Bool)
    case shutDownReturned
    case fail
    /// Sends `.touch` (which arms a marked timer) from an effect, `seconds` later.
    case touchLater(seconds: Int)
    /// A marked merge: a long watch and an idle timer.
    case watch
  }

  struct SaveFailed: Error, CustomStringConvertible {
    var description: String { "the disk is full" }
  }

  enum CancelID { case idle }

  let clock: TestClock
  let store: LockIsolated<Store<State, Action>?>

  func reduce(into state: inout State, action: Action) -> Effect<Action> {
    switch action {
    case .touch:
      state.log.append("touch")
      return .send(.idle, after: .seconds(300), clock: self.clock)
        .cancellable(id: CancelID.idle, cancelInFlight: true)
        .cancelledOnShutdown()
    case .idle:
      state.log.append("idle")
      return .none
    case .save(let seconds):
      return .run { [clock] send in
        try await clock.sleep(for: .seconds(seconds))
        await send(.saved)
      }
    case .saved:
      state.log.append("saved")
      return .none
    case .add(let amount):
      state.total += amount
      return .none
    case .addTwice(let amount):
      state.total += amount
      return .send(.add(amount))
    case .shutDownFromEffect(let graceful):
      return .run { [store] send in
        guard let store = store.value else { return }
        if graceful {
          await store.shutdown(gracePeriod: .seconds(10))
        } else {
          await store.shutdown()
        }
        // The store is shut down: this action is dropped, but reaching here is the point.
        await send(.shutDownReturned)
      }
    case .shutDownReturned:
      state.log.append("returned")
      return .none
    case .fail:
      return .run { _ in throw SaveFailed() }
    case .touchLater(let seconds):
      return .run { [clock] send in
        try await clock.sleep(for: .seconds(seconds))
        await send(.touch)
      }
    case .watch:
      return .merge(
        .run { [clock] _ in try await clock.sleep(for: .seconds(3_600)) },
        .send(.idle, after: .seconds(300), clock: self.clock)
      )
      .cancelledOnShutdown()
    }
  }
}

/// A store on a manual executor whose `continuousClock` is a test clock.
///
/// A class, so that it ends what it started: the reducer holds the store (for the effects that
/// shut it down), a cycle broken here, and effects parked on the manual executor are cancelled
/// and drained.
private final class SessionHarness: Sendable {
  let executor = ManualExecutor()
  let clock = TestClock()
  let box = LockIsolated<Store<ShutdownSession.State, ShutdownSession.Action>?>(nil)
  let store: Store<ShutdownSession.State, ShutdownSession.Action>
  let returned = LockIsolated(false)

  init(observer: (any StoreObserver<ShutdownSession.State, ShutdownSession.Action>)? = nil) {
    var dependencies = DependencyValues()
    dependencies.continuousClock = self.clock
    self.store = Store(
      initialState: ShutdownSession.State(),
      reducer: ShutdownSession(clock: self.clock, store: self.box),
      configuration: StoreConfiguration(
        executorPreference: self.executor,
        dependencies: dependencies
      ),
      storeObserver: observer
    )
    self.box.setValue(self.store)
  }

  deinit {
    self.box.setValue(nil)
    tearDown(self.store, on: self.executor)
  }

  func send(_ action: ShutdownSession.Action) async {
    await self.executor.perform { [store] in await store.send(action) }
  }

  func startShutdown(gracePeriod: Duration) {
    let (store, clock, executor, returned) = (self.store, self.clock, self.executor, self.returned)
    _ = Task(executorPreference: executor) {
      await TestExecution.$drainer.withValue(executor) {
        await store.shutdown(gracePeriod: gracePeriod, clock: clock)
        returned.setValue(true)
      }
    }
    executor.drainUntilIdle()
  }

  var state: ShutdownSession.State {
    get async { await self.executor.perform { [store] in await store.state } }
  }
}

@Suite(.timeLimit(.minutes(1))) struct EffectsAtShutdownTests {
  @Test func aGracefulShutdownCancelsMarkedTimersAtOnceAndWaitsForTheSave() async {
    let harness = SessionHarness()
    await harness.send(.touch)
    await harness.send(.save(seconds: 1))
    harness.startShutdown(gracePeriod: .seconds(10))
    #expect(!harness.returned.value)
    // Only the save holds the shutdown: one second, not the idle timer's 300 nor the 10 s grace.
    await harness.clock.advance(by: .seconds(1))
    #expect(harness.returned.value)
    #expect(await harness.state.log == ["touch", "saved"])
    #expect(harness.store.liveEffectCount == 0)
    #expect(harness.clock.sleeperCount == 0)
  }

  @Test func aStoreWithOnlyMarkedEffectsShutsDownGracefullyWithoutWaiting() async {
    let harness = SessionHarness()
    await harness.send(.touch)
    #expect(harness.clock.sleeperCount == 1)
    harness.startShutdown(gracePeriod: .seconds(10))
    #expect(harness.returned.value)
    #expect(harness.clock.sleeperCount == 0)
    #expect(await harness.state.log == ["touch"])
  }

  @Test func aMarkedEffectReturnedWhileDrainingNeverStarts() async {
    let harness = SessionHarness()
    await harness.send(.touchLater(seconds: 1))
    harness.startShutdown(gracePeriod: .seconds(10))
    #expect(!harness.returned.value)
    // The effect's `.touch` is reduced during the drain: its marked timer is not armed.
    await harness.clock.advance(by: .seconds(1))
    #expect(harness.returned.value)
    #expect(harness.clock.sleeperCount == 0)
    #expect(await harness.state.log == ["touch"])
  }

  @Test func everyUnitOfAMarkedMergeIsCancelledWhenTheDrainBegins() async {
    let harness = SessionHarness()
    await harness.send(.watch)
    #expect(harness.clock.sleeperCount == 2)
    #expect(harness.store.liveEffectCount == 2)
    harness.startShutdown(gracePeriod: .seconds(10))
    #expect(harness.returned.value)
    #expect(harness.clock.sleeperCount == 0)
    #expect(harness.store.liveEffectCount == 0)
  }

  @Test func aPlainShutdownStillCancelsMarkedEffects() async {
    let harness = SessionHarness()
    await harness.send(.touch)
    await harness.executor.perform { [store = harness.store] in await store.shutdown() }
    #expect(harness.clock.sleeperCount == 0)
    await harness.clock.advance(by: .seconds(300))
    #expect(await harness.state.log == ["touch"])
  }

  @Test func unmarkedEffectsStillHoldAGracefulShutdown() async {
    let harness = SessionHarness()
    await harness.send(.save(seconds: 5))
    harness.startShutdown(gracePeriod: .seconds(10))
    await harness.clock.advance(by: .seconds(4))
    #expect(!harness.returned.value)
    await harness.clock.advance(by: .seconds(1))
    #expect(harness.returned.value)
    #expect(await harness.state.log == ["saved"])
  }

  @Test func aShutdownCalledFromTheStoresOwnEffectReturns() async {
    let harness = SessionHarness()
    await harness.send(.save(seconds: 60))
    await harness.send(.shutDownFromEffect(graceful: false))
    // The effect's `shutdown()` cancelled the save, waited for it, and returned: the store has no
    // effect left and nothing hangs.
    #expect(harness.store.liveEffectCount == 0)
    let isShutDown = await harness.executor.perform { [store = harness.store] in
      await store.isShutDown
    }
    #expect(isShutDown)
    #expect(harness.clock.sleeperCount == 0)
  }

  @Test func aGracefulShutdownCalledFromTheStoresOwnEffectWaitsForTheOthers() async {
    let harness = SessionHarness()
    await harness.send(.touch)
    await harness.send(.save(seconds: 2))
    await harness.send(.shutDownFromEffect(graceful: true))
    #expect(harness.store.liveEffectCount == 2)  // the save and the shutting-down effect
    await harness.clock.advance(by: .seconds(2))
    #expect(harness.store.liveEffectCount == 0)
    // The save finished within the grace period and its action was reduced; the idle timer did
    // not hold the shutdown; the action sent after `shutdown` returned was dropped.
    #expect(await harness.state.log == ["touch", "saved"])
  }

  @Test func effectEndedCarriesTheDurationOnTheStoresClock() async {
    let recorder = LockIsolated<[(String, Duration)]>([])
    struct Durations: StoreObserver {
      typealias State = ShutdownSession.State
      typealias Action = ShutdownSession.Action
      let recorder: LockIsolated<[(String, Duration)]>
      func effectEnded(_ effect: EffectReference, outcome: EffectOutcome, duration: Duration) {
        self.recorder.withValue { $0.append(("\(outcome)", duration)) }
      }
    }
    let harness = SessionHarness(observer: Durations(recorder: recorder))
    await harness.send(.save(seconds: 3))
    await harness.clock.advance(by: .seconds(3))
    #expect(recorder.value.map(\.0) == ["finished"])
    #expect(recorder.value.map(\.1) == [.seconds(3)])
  }

  @Test func theTwoArgumentEffectEndedStillHearsEveryEnd() async {
    let outcomes = LockIsolated<[String]>([])
    struct Outcomes: StoreObserver {
      typealias State = ShutdownSession.State
      typealias Action = ShutdownSession.Action
      let outcomes: LockIsolated<[String]>
      func effectEnded(_ effect: EffectReference, outcome: EffectOutcome) {
        self.outcomes.withValue { $0.append("\(outcome)") }
      }
    }
    let harness = SessionHarness(observer: Outcomes(outcomes: outcomes))
    await harness.send(.save(seconds: 1))
    await harness.clock.advance(by: .seconds(1))
    #expect(outcomes.value == ["finished"])
  }

  @Test func anUncaughtErrorNamesTheErrorItsTypeTheActionAndTheEffectsLine() async {
    let (_, issues) = await collectingIssues {
      let harness = SessionHarness()
      await harness.send(.fail)
      return harness
    }
    let message = issues.first?.message ?? ""
    #expect(message.contains("the disk is full"))
    #expect(message.contains("ShutdownSession.SaveFailed"))
    #expect(message.contains("by the action\n    .fail"))
    #expect(message.contains("EffectsAtShutdownTests.swift:"))
  }

  @Test func sendReadingReadsTheStateAfterTheActionAndItsChainedSends() async {
    let store = Store(initialState: ShutdownSession.State()) {
      ShutdownSession(clock: TestClock(), store: LockIsolated(nil))
    }
    let total = await store.send(.addTwice(2), reading: { $0.total })
    #expect(total == 4)
    let rejected = await store.trySend(.add(1), reading: { $0.total })
    #expect(rejected?.value == 5)
    await store.shutdown()
    #expect(await store.trySend(.add(1), reading: { $0.total }) == nil)
  }

  @Test func finishAwaitedFromItsOwnEffectReportsAndReturnsInsteadOfHanging() async {
    struct AwaitsItself: Reducer {
      let ownTask: AsyncStream<StoreTask>
      func reduce(into state: inout [String], action: String) -> Effect<String> {
        switch action {
        case "start":
          return .run { [ownTask] send in
            for await task in ownTask {
              await task.finish()
              await send("returned")
              return
            }
          }
        default:
          state.append(action)
          return .none
        }
      }
    }
    let (log, issues) = await collectingIssues {
      let (stream, continuation) = AsyncStream.makeStream(of: StoreTask.self)
      let store = Store(initialState: [String]()) { AwaitsItself(ownTask: stream) }
      let task = await store.send("start")
      continuation.yield(task)
      // From outside, `finish()` waits for the effect, which did not wait for itself.
      await task.finish()
      return await store.state
    }
    #expect(log == ["returned"])
    #expect(issues.count == 1)
    #expect(issues.first?.message.contains("'StoreTask.finish()' was awaited from inside") == true)
  }

  @Test func sendReadingAfterShutdownReportsAndReadsTheUnchangedState() async {
    let (total, issues) = await collectingIssues {
      let store = Store(initialState: ShutdownSession.State()) {
        ShutdownSession(clock: TestClock(), store: LockIsolated(nil))
      }
      await store.send(.add(3))
      await store.shutdown()
      return await store.send(.add(1), reading: { $0.total })
    }
    #expect(total == 3)
    #expect(issues.count == 1)
  }
}

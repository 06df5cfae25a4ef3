import Testing
import Unidirectional
import UnidirectionalTesting

struct Worker: Reducer {
  typealias State = [String]

  enum Action: Sendable {
    case work(seconds: Int)
    case fail
    case stubborn
    case done(String)
  }

  struct Failure: Error {}

  let clock: TestClock
  let parked: LockIsolated<UnsafeContinuation<Void, Never>?>

  func reduce(into state: inout [String], action: Action) -> Effect<Action> {
    switch action {
    case .work(let seconds):
      return .run { [clock] send in
        try await clock.sleep(for: .seconds(seconds))
        await send(.done("worked \(seconds) s"))
      }
    case .fail:
      return .run { [clock] _ in
        try await clock.sleep(for: .seconds(1))
        throw Failure()
      }
    case .stubborn:
      return .run { [parked] send in
        // Ignores cancellation: waits for a continuation only the test resumes.
        await withUnsafeContinuation { parked.setValue($0) }
        await send(.done("stubborn"))
      }
    case .done(let text):
      state.append(text)
      return .none
    }
  }
}

/// A store on a manual executor, and a way to start `shutdown(gracePeriod:)` on it.
private struct Harness {
  let executor = ManualExecutor()
  let clock = TestClock()
  let store: Store<[String], Worker.Action>
  let returned = LockIsolated(false)
  let parked = LockIsolated<UnsafeContinuation<Void, Never>?>(nil)

  /// Creates the store; it reports its issues to the reporter in force here.
  init() {
    self.store = Store(
      initialState: [],
      reducer: Worker(clock: self.clock, parked: self.parked),
      configuration: StoreConfiguration(executorPreference: self.executor)
    )
  }

  func send(_ action: Worker.Action) async {
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

  var state: [String] {
    get async { await self.executor.perform { [store] in await store.state } }
  }
}

@Suite(.timeLimit(.minutes(2))) struct GracefulShutdownTests {
  @Test func anEffectThatFinishesWithinTheGracePeriodIsLetFinish() async {
    let harness = Harness()
    await harness.send(.work(seconds: 1))
    harness.startShutdown(gracePeriod: .seconds(2))
    #expect(!harness.returned.value)
    await harness.clock.advance(by: .seconds(1))
    #expect(harness.returned.value)
    #expect(await harness.state == ["worked 1 s"])
    #expect(harness.store.liveEffectCount == 0)
  }

  @Test func sendsAreRejectedWhileShuttingDown() async {
    let (harness, issues) = await collectingIssues {
      let harness = Harness()
      await harness.send(.work(seconds: 1))
      harness.startShutdown(gracePeriod: .seconds(2))
      await harness.send(.done("late"))
      return harness
    }
    #expect(
      issues.map(\.message).first?.hasPrefix(
        "An action was sent to a store that has been shut down."
      ) == true
    )
    await harness.clock.advance(by: .seconds(1))
    #expect(await harness.state == ["worked 1 s"])
  }

  @Test func anEffectStillRunningAfterTheGracePeriodIsCancelled() async {
    let harness = Harness()
    await harness.send(.work(seconds: 10))
    harness.startShutdown(gracePeriod: .seconds(2))
    await harness.clock.advance(by: .seconds(2))
    #expect(harness.returned.value)
    #expect(await harness.state == [])
    #expect(harness.store.liveEffectCount == 0)
    #expect(harness.clock.sleeperCount == 0)
  }

  @Test func anEffectThatThrowsIsReportedAndShutdownCompletes() async {
    let (harness, issues) = await collectingIssues {
      let harness = Harness()
      await harness.send(.fail)
      harness.startShutdown(gracePeriod: .seconds(2))
      await harness.clock.advance(by: .seconds(1))
      return harness
    }
    #expect(harness.returned.value)
    #expect(issues.count == 1)
  }

  @Test func anEffectThatSwallowsCancellationIsReportedInsteadOfHanging() async {
    let (harness, issues) = await collectingIssues {
      let harness = Harness()
      await harness.send(.stubborn)
      harness.startShutdown(gracePeriod: .seconds(2))
      await harness.clock.advance(by: .seconds(2))
      #expect(!harness.returned.value)
      await harness.clock.advance(by: .seconds(2))
      return harness
    }
    #expect(harness.returned.value)
    #expect(issues.count == 1)
    #expect(
      issues.first?.message.hasPrefix(
        "1 effect ignored cancellation and is still running after 'shutdown(gracePeriod: 2.0 seconds)'."
      ) == true
    )
    // Let it end, so no task outlives the test; its late action is dropped.
    harness.parked.value?.resume()
    harness.executor.drainUntilIdle()
    #expect(harness.store.liveEffectCount == 0)
    #expect(await harness.state == [])
  }

  @Test func plainShutdownCancelsAtOnce() async {
    let harness = Harness()
    await harness.send(.work(seconds: 10))
    await harness.executor.perform { [store = harness.store] in await store.shutdown() }
    #expect(harness.store.liveEffectCount == 0)
    #expect(harness.clock.sleeperCount == 0)
  }
}

/// A `StoreGroup` shuts its stores down in phases, each phase for every store, with one wait for
/// the whole group.
@Suite(.timeLimit(.minutes(2))) struct GroupShutdownTests {
  /// Stores on one manual executor and test clock, in one group.
  private struct Fleet {
    let executor = ManualExecutor()
    let clock = TestClock()
    let parked = LockIsolated<UnsafeContinuation<Void, Never>?>(nil)
    let group = StoreGroup()
    let returned = LockIsolated<Int?>(nil)

    func makeStore() -> Store<[String], Worker.Action> {
      let store = Store(
        initialState: [],
        reducer: Worker(clock: self.clock, parked: self.parked),
        configuration: StoreConfiguration(executorPreference: self.executor)
      )
      self.group.insert(store)
      return store
    }

    func send(_ action: Worker.Action, to store: Store<[String], Worker.Action>) async {
      await self.executor.perform { await store.send(action) }
    }

    func startShutdown(gracePeriod: Duration) {
      let (group, clock, executor, returned) = (
        self.group, self.clock, self.executor, self.returned
      )
      _ = Task(executorPreference: executor) {
        await TestExecution.$drainer.withValue(executor) {
          returned.setValue(await group.shutdown(gracePeriod: gracePeriod, clock: clock))
        }
      }
      executor.drainUntilIdle()
    }
  }

  @Test func effectsFinishingWithinTheGraceDeliverAndTheRestAreCancelledTogether() async {
    let fleet = Fleet()
    let quick = fleet.makeStore()
    let slow = fleet.makeStore()
    await fleet.send(.work(seconds: 1), to: quick)
    await fleet.send(.work(seconds: 10), to: slow)
    fleet.startShutdown(gracePeriod: .seconds(2))
    // One sleeper for the whole group's grace, not one per store.
    #expect(fleet.clock.sleeperCount == 3)
    await fleet.clock.advance(by: .seconds(1))
    #expect(fleet.returned.value == nil)
    await fleet.clock.advance(by: .seconds(1))
    #expect(fleet.returned.value == 2)
    #expect(await fleet.executor.perform { await quick.state } == ["worked 1 s"])
    #expect(await fleet.executor.perform { await slow.state } == [])
    #expect(quick.liveEffectCount == 0 && slow.liveEffectCount == 0)
    #expect(fleet.clock.sleeperCount == 0)
  }

  @Test func onlyTheStoreWhoseEffectIgnoresCancellationIsReported() async {
    let (fleet, issues) = await collectingIssues {
      let fleet = Fleet()
      let stubborn = fleet.makeStore()
      let plain = fleet.makeStore()
      await fleet.send(.stubborn, to: stubborn)
      await fleet.send(.work(seconds: 10), to: plain)
      fleet.startShutdown(gracePeriod: .zero)
      // A zero grace period still gives cancelled effects a second to end.
      #expect(fleet.returned.value == nil)
      await fleet.clock.advance(by: .seconds(1))
      return fleet
    }
    #expect(fleet.returned.value == 2)
    #expect(issues.count == 1)
    #expect(
      issues.first?.message.hasPrefix(
        "1 effect ignored cancellation and is still running after 'shutdown(gracePeriod: 0.0 seconds)'."
      ) == true
    )
    fleet.parked.value?.resume()
    fleet.executor.drainUntilIdle()
  }

  @Test func observersHearOfAGroupShutdownOnce() async {
    struct ShutdownCounter: StoreObserver {
      typealias State = Int
      typealias Action = Int
      let count: LockIsolated<Int>
      func storeShutDown() { self.count.withValue { $0 += 1 } }
    }
    let group = StoreGroup()
    let heard = LockIsolated(0)
    let observed = Store(initialState: 0, observer: ShutdownCounter(count: heard)) {
      Reduce<Int, Int> { _, _ in .run { _ in await untilCancelled() } }
    }
    let quiet = Store(initialState: 0, observer: ShutdownCounter(count: heard)) {
      Reduce<Int, Int> { _, _ in .none }
    }
    group.insert(observed)
    group.insert(quiet)
    await observed.send(1)
    #expect(await group.shutdown(gracePeriod: .zero) == 2)
    #expect(heard.value == 2)
    await observed.shutdown()
    #expect(heard.value == 2)
  }

  @Test func aStoreAlreadyShutDownIsCountedAndLeftAlone() async {
    let fleet = Fleet()
    let first = fleet.makeStore()
    let second = fleet.makeStore()
    await fleet.executor.perform { await first.shutdown() }
    await fleet.send(.work(seconds: 10), to: second)
    fleet.startShutdown(gracePeriod: .zero)
    #expect(fleet.returned.value == 2)
    #expect(second.liveEffectCount == 0)
  }
}

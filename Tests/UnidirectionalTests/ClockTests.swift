import Testing
import Unidirectional
import UnidirectionalTesting

/// Runs `body` as a task on a manual executor whose wake-ups the test clock drains, so every
/// woken sleeper runs until it sleeps again before `advance` returns.
private func onManualExecutor(
  _ body: @escaping @Sendable () async -> Void
) -> (ManualExecutor, Task<Void, Never>) {
  let executor = ManualExecutor()
  let task = Task(executorPreference: executor) {
    await TestExecution.$drainer.withValue(executor) { await body() }
  }
  executor.drainUntilIdle()
  return (executor, task)
}

@Suite(.timeLimit(.minutes(2))) struct TestClockTests {
  @Test func advancingOneThenFourSecondsDeliversEachTickInOrder() async {
    let clock = TestClock()
    let ticks = LockIsolated<[Duration]>([])
    let (executor, task) = onManualExecutor {
      for await elapsed in clock.timer(interval: .seconds(1)) {
        ticks.withValue { $0.append(elapsed) }
      }
    }
    await clock.advance(by: .seconds(1))
    #expect(ticks.value == [.seconds(1)])
    await clock.advance(by: .seconds(4))
    #expect(ticks.value == [.seconds(1), .seconds(2), .seconds(3), .seconds(4), .seconds(5)])
    task.cancel()
    executor.drainUntilIdle()
  }

  @Test func aTimerWhoseIntervalShrinksFiresAt1000_950_900_850_800() async {
    let clock = TestClock()
    let fired = LockIsolated<[Duration]>([])
    let (executor, task) = onManualExecutor {
      var interval = Duration.milliseconds(1_000)
      var last = clock.now
      while (try? await clock.sleep(for: interval)) != nil {
        fired.withValue { $0.append(last.duration(to: clock.now)) }
        last = clock.now
        interval -= .milliseconds(50)
      }
    }
    await clock.advance(by: .milliseconds(1_000 + 950 + 900 + 850 + 800))
    #expect(fired.value == [1_000, 950, 900, 850, 800].map { .milliseconds($0) })
    task.cancel()
    executor.drainUntilIdle()
  }

  @Test func sleepersWakeInDeadlineOrderTiesInSleepOrder() async {
    let clock = TestClock()
    let order = LockIsolated<[String]>([])
    let (_, task) = onManualExecutor {
      await withDiscardingTaskGroup { group in
        for (name, seconds) in [("c", 3), ("a1", 1), ("b", 2), ("a2", 1)] {
          group.addTask {
            try? await clock.sleep(for: .seconds(seconds))
            order.withValue { $0.append("\(name)@\(clock.now.offset)") }
          }
        }
      }
    }
    await clock.advance(by: .seconds(3))
    #expect(order.value == ["a1@1.0 seconds", "a2@1.0 seconds", "b@2.0 seconds", "c@3.0 seconds"])
    await task.value
  }

  @Test func aSleepScheduledDuringAnAdvanceWakesWithinIt() async {
    let clock = TestClock()
    let woke = LockIsolated<[Duration]>([])
    let (executor, task) = onManualExecutor {
      try? await clock.sleep(for: .seconds(1))
      woke.withValue { $0.append(clock.now.offset) }
      try? await clock.sleep(for: .seconds(2))
      woke.withValue { $0.append(clock.now.offset) }
      try? await clock.sleep(for: .seconds(5))
      woke.withValue { $0.append(clock.now.offset) }
    }
    await clock.advance(by: .seconds(4))
    #expect(woke.value == [.seconds(1), .seconds(3)])
    #expect(clock.now.offset == .seconds(4))
    #expect(clock.sleeperCount == 1)
    task.cancel()
    executor.drainUntilIdle()
  }

  @Test func cancellingASleeperMidAdvanceRemovesItAtOnce() async {
    let clock = TestClock()
    let log = LockIsolated<[String]>([])
    let executor = ManualExecutor()
    let second = Task(executorPreference: executor) {
      await TestExecution.$drainer.withValue(executor) {
        do {
          try await clock.sleep(for: .seconds(2))
          log.withValue { $0.append("second woke") }
        } catch {
          log.withValue { $0.append("second cancelled at \(clock.now.offset)") }
        }
      }
    }
    _ = Task(executorPreference: executor) {
      await TestExecution.$drainer.withValue(executor) {
        try? await clock.sleep(for: .seconds(1))
        log.withValue { $0.append("first woke; cancelling the second") }
        second.cancel()
      }
    }
    executor.drainUntilIdle()
    #expect(clock.sleeperCount == 2)
    await clock.advance(by: .seconds(5))
    executor.drainUntilIdle()
    #expect(log.value == ["first woke; cancelling the second", "second cancelled at 1.0 seconds"])
    #expect(clock.sleeperCount == 0)
  }

  @Test func sleepingUntilAPassedDeadlineReturnsAtOnce() async throws {
    let clock = TestClock()
    await clock.advance(by: .seconds(5))
    try await clock.sleep(until: .init(offset: .seconds(2)))
    #expect(clock.sleeperCount == 0)
  }

  @Test func runAdvancesUntilNoSleeperRemainsAndReportsATimerThatNeverStops() async {
    let clock = TestClock()
    let (executor, task) = onManualExecutor {
      for await _ in clock.timer(interval: .seconds(1)) {}
    }
    let (_, issues) = await collectingIssues {
      await clock.run(maximumSteps: 10)
    }
    #expect(issues.count == 1)
    #expect(
      issues.first?.message.hasPrefix(
        "'TestClock.run()' stopped after 10 deadlines with tasks still sleeping."
      ) == true
    )
    task.cancel()
    executor.drainUntilIdle()

    let finite = TestClock()
    let done = LockIsolated(false)
    let (_, second) = onManualExecutor {
      try? await finite.sleep(for: .seconds(3))
      try? await finite.sleep(for: .seconds(3))
      done.setValue(true)
    }
    await finite.run()
    #expect(done.value)
    #expect(finite.now.offset == .seconds(6))
    await second.value
  }
}

@Suite(.timeLimit(.minutes(2))) struct ImmediateAndUnimplementedClockTests {
  @Test func immediateClockReturnsAtOnceAndAdvancesNow() async throws {
    let clock = ImmediateClock()
    try await clock.sleep(for: .seconds(3))
    try await clock.sleep(for: .milliseconds(500))
    #expect(clock.now.offset == .milliseconds(3_500))
  }

  @Test func immediateClockHonoursCancellation() async {
    let clock = ImmediateClock()
    let task = Task {
      withUnsafeCurrentTask { $0?.cancel() }
      do {
        try await clock.sleep(for: .seconds(1))
        return false
      } catch {
        return error is CancellationError
      }
    }
    #expect(await task.value)
  }

  @Test func unimplementedClockReportsTheCall() async {
    let clock = UnimplementedClock(name: "continuousClock")
    let (_, issues) = await collectingIssues {
      try? await clock.sleep(for: .seconds(1))
    }
    #expect(issues.count == 1)
    #expect(
      issues.first?.message.hasPrefix(
        "An unimplemented clock was used: 'continuousClock.sleep(until:)'"
      ) == true
    )
    #expect(clock.now.offset == .zero)
  }
}

@Suite(.timeLimit(.minutes(2))) struct DebounceThrottleTests {
  private struct Search: Reducer {
    typealias State = [String]
    enum Action: Equatable, Sendable {
      case typed(String)
      case scrolled(Int)
      case results(String)
      case loaded(Int)
    }

    let clock: any Clock<Duration>
    let latest: Bool

    func reduce(into state: inout [String], action: Action) -> Effect<Action> {
      switch action {
      case .typed(let query):
        return .send(.results(query)).debounce(
          id: "search",
          for: .milliseconds(300),
          clock: self.clock
        )
      case .scrolled(let offset):
        return .send(.loaded(offset))
          .throttle(id: "load", for: .seconds(1), clock: self.clock, latest: self.latest)
      case .results(let query):
        state.append("results \(query)")
        return .none
      case .loaded(let offset):
        state.append("loaded \(offset)")
        return .none
      }
    }
  }

  @Test func debounceKeepsOnlyTheLastOfABurst() async {
    let clock = TestClock()
    let store = TestStore(initialState: [String]()) { Search(clock: clock, latest: true) }
    await store.send(.typed("s"))
    await clock.advance(by: .milliseconds(100))
    await store.send(.typed("sw"))
    await clock.advance(by: .milliseconds(299))
    await store.send(.typed("swi"))
    await clock.advance(by: .milliseconds(300))
    await store.receive(.results("swi")) { $0 = ["results swi"] }
  }

  @Test func aDebounceOfTenThousandRapidActionsOnAnImmediateClockLeavesOne() async {
    let executor = ManualExecutor()
    let store = Store(
      initialState: [String](),
      reducer: Search(clock: ImmediateClock(), latest: true),
      configuration: StoreConfiguration(executorPreference: executor)
    )
    defer { tearDown(store, on: executor) }
    // All 10,000 sends happen before any effect gets to run: each cancels the one before.
    await executor.perform {
      for index in 0..<10_000 { await store.send(.typed("\(index)")) }
    }
    #expect(await executor.perform { await store.state } == ["results 9999"])
    #expect(store.liveEffectCount == 0)
    #expect(store.registeredIdentifierCount == 0)
  }

  @Test(arguments: [true, false])
  func throttleRunsTheFirstAtOnceThenOnePerInterval(latest: Bool) async {
    let clock = TestClock()
    let store = TestStore(initialState: [String]()) { Search(clock: clock, latest: latest) }
    await store.send(.scrolled(1))
    await store.receive(.loaded(1)) { $0 = ["loaded 1"] }
    await store.send(.scrolled(2))
    await clock.advance(by: .milliseconds(100))
    await store.send(.scrolled(3))
    await clock.advance(by: .milliseconds(900))
    let kept = latest ? 3 : 2
    await store.receive(.loaded(kept)) { $0.append("loaded \(kept)") }
    await clock.advance(by: .seconds(2))
    await store.send(.scrolled(4))
    await store.receive(.loaded(4)) { $0.append("loaded 4") }
  }
}

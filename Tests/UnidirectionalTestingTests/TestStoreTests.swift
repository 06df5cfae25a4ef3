import Testing
import Unidirectional
import UnidirectionalTesting

@Suite(.timeLimit(.minutes(2))) struct TestStoreScenarios {
  @Test func decrementBelowZeroReceivesTheDelayedResponse() async {
    let clock = TestClock()
    let store = TestStore(initialState: Counter.State()) { Counter(clock: clock) }
    await store.send(.decrementTapped) { $0.count = -1 }
    await clock.advance(by: .seconds(1))
    await store.receive(.decrementDelayResponse) { $0.count = 0 }
  }

  @Test func incrementingBackCancelsTheDelayedResponse() async {
    let clock = TestClock()
    let store = TestStore(initialState: Counter.State()) { Counter(clock: clock) }
    await store.send(.decrementTapped) { $0.count = -1 }
    await store.send(.incrementTapped) { $0.count = 0 }
  }

  @Test func timerTicksAreReceivedInOrderUntilStopped() async {
    let clock = TestClock()
    let store = TestStore(initialState: Counter.State()) { Counter(clock: clock) }
    await store.send(.startTimerTapped) { $0.isTimerRunning = true }
    await clock.advance(by: .seconds(1))
    await store.receive(.timerTick) { $0.count = 1 }
    await clock.advance(by: .seconds(4))
    await store.receive(.timerTick) { $0.count = 2 }
    await store.receive(.timerTick) { $0.count = 3 }
    await store.receive(.timerTick) { $0.count = 4 }
    await store.receive(.timerTick) { $0.count = 5 }
    await store.send(.stopTimerTapped) { $0.isTimerRunning = false }
  }

  @Test func speedingTimerTicksAt1000_950_900_850_800() async {
    let clock = TestClock()
    let store = TestStore(initialState: Counter.State()) { Counter(clock: clock) }
    await store.send(.speedingTimerTapped) { $0.isTimerRunning = true }
    for (index, interval) in [1_000, 950, 900, 850, 800].enumerated() {
      await clock.advance(by: .milliseconds(interval - 1))
      #expect(store.state.count == index)  // not yet
      await clock.advance(by: .milliseconds(1))
      await store.receive(.timerTick) { $0.count = index + 1 }
    }
    await store.send(.stopTimerTapped) { $0.isTimerRunning = false }
  }

  @Test func nthPrimeOf200ReportsProgressThenThePrime() async {
    let store = TestStore(initialState: Counter.State(count: 200)) { Counter() }
    await store.send(.nthPrimeTapped) { $0.progress = 0 }
    await store.receive(.nthPrimeProgress(0.84)) { $0.progress = 0.84 }
    await store.receive(.nthPrimeResponse(1223)) {
      $0.progress = nil
      $0.fact = "The 200th prime is 1223."
    }
    #expect(store.outsideWorkWaits == 0)
  }

  @Test func aLongLivingEffectEndsWhenItsTaskIsCancelled() async {
    let clock = TestClock()
    let store = TestStore(initialState: Counter.State()) { Counter(clock: clock) }
    let task = await store.send(.startTimerTapped) { $0.isTimerRunning = true }
    await clock.advance(by: .seconds(1))
    await store.receive(.timerTick) { $0.count = 1 }
    await task.cancel()
    #expect(task.isCancelled)
    await clock.advance(by: .seconds(10))
    await task.finish()
    #expect(store.outsideWorkWaits == 0)
  }

  @Test func finishWaitsForEffectsThatOnlyUseTheTestExecutor() async {
    let clock = TestClock()
    let store = TestStore(initialState: Counter.State()) { Counter(clock: clock) }
    await store.send(.decrementTapped) { $0.count = -1 }
    await clock.advance(by: .seconds(1))
    await store.receive(.decrementDelayResponse) { $0.count = 0 }
    await store.finish()
    #expect(store.outsideWorkWaits == 0)
  }

  @Test func nonExhaustiveStoreAssertsOnlyWhatIsNamed() async {
    let clock = TestClock()
    let store = TestStore(initialState: Counter.State()) { Counter(clock: clock) }
    store.exhaustivity = .off
    await store.send(.startTimerTapped)
    await clock.advance(by: .seconds(3))
    await store.receive(.timerTick) { $0.count = 1 }
    // The two later ticks are skipped by the next send.
    await store.send(.incrementTapped) { $0.count = 4 }
    // The timer is still running; a non-exhaustive store does not fail for it.
  }

  @Test func skipReceivedActionsAndInFlightEffects() async {
    let clock = TestClock()
    let store = TestStore(initialState: Counter.State()) { Counter(clock: clock) }
    await store.send(.startTimerTapped) { $0.isTimerRunning = true }
    await clock.advance(by: .seconds(2))
    await store.skipReceivedActions()
    #expect(store.state.count == 2)
    await store.skipInFlightEffects()
    await store.send(.incrementTapped) { $0.count = 3 }
  }
}

@Suite(.timeLimit(.minutes(2))) struct TestStoreFailures {
  @Test func aWrongStateAssertionFailsWithADiff() async {
    let issues = await collectingIssues {
      let store = TestStore(initialState: Counter.State()) { Counter() }
      await store.send(.incrementTapped) { $0.count = 2 }
    }
    #expect(issues.count == 1)
    let message = issues.first?.message ?? ""
    #expect(message.hasPrefix("A state change does not match expectation:"))
    #expect(message.contains("-   count: 2,"))
    #expect(message.contains("+   count: 1,"))
    #expect(message.contains("(Expected: -, Actual: +)"))
    #expect(issues.first?.fileID == #fileID)
  }

  @Test func anUnassertedChangeFails() async {
    let issues = await collectingIssues {
      let store = TestStore(initialState: Counter.State()) { Counter() }
      await store.send(.incrementTapped)
    }
    #expect(
      issues.map(\.message).first?.hasPrefix(
        "State was not expected to change, but a change occurred:"
      ) == true
    )
  }

  @Test func aClosureThatChangesNothingFails() async {
    let issues = await collectingIssues {
      let store = TestStore(initialState: Counter.State()) { Counter() }
      await store.send(.stopTimerTapped) { $0.isTimerRunning = false }
    }
    #expect(
      issues.map(\.message).first?.hasPrefix(
        "Expected the state to change, but no change occurred."
      ) == true
    )
  }

  @Test func removingTheCancelLeavesAnEffectRunning() async {
    let clock = TestClock()
    var sendLine = 0
    let issues = await collectingIssues {
      let store = TestStore(initialState: Counter.State()) { Counter(clock: clock) }
      sendLine = #line + 1
      await store.send(.decrementTapped) { $0.count = -1 }
    }
    #expect(issues.count == 1)
    let issue = issues.first
    #expect(
      issue?.message.hasPrefix("An effect returned for this action is still running.") == true
    )
    #expect(issue?.message.contains("Action: .decrementTapped") == true)
    #expect(issue?.line == sendLine)
    #expect(clock.sleeperCount == 0)  // the test store cancelled it on the way out
  }

  @Test func anUnreceivedActionFailsAtTheEnd() async {
    let clock = TestClock()
    let issues = await collectingIssues {
      let store = TestStore(initialState: Counter.State()) { Counter(clock: clock) }
      await store.send(.decrementTapped) { $0.count = -1 }
      await clock.advance(by: .seconds(1))
    }
    #expect(
      issues.map(\.message) == [
        """
        The store received 1 unexpected action by the end of this test:

          .decrementDelayResponse

        Assert each with 'receive', or call 'skipReceivedActions()'.
        """
      ]
    )
  }

  @Test func sendingBeforeReceivingFails() async {
    let clock = TestClock()
    let issues = await collectingIssues {
      let store = TestStore(initialState: Counter.State()) { Counter(clock: clock) }
      await store.send(.decrementTapped) { $0.count = -1 }
      await clock.advance(by: .seconds(1))
      await store.send(.incrementTapped) { $0.count = 1 }
    }
    #expect(
      issues.map(\.message.firstLine) == [
        "Must handle 1 received action before sending an action:",
        // The action stays pending, and the end of the test reports it again.
        "The store received 1 unexpected action by the end of this test:",
      ]
    )
  }

  @Test func receivingTheWrongActionFailsWithADiff() async {
    let clock = TestClock()
    let issues = await collectingIssues {
      let store = TestStore(initialState: Counter.State()) { Counter(clock: clock) }
      await store.send(.decrementTapped) { $0.count = -1 }
      await clock.advance(by: .seconds(1))
      await store.receive(.timerTick) { $0.count = 0 }
    }
    #expect(
      issues.map(\.message) == [
        """
        Received unexpected action:

          - .timerTick
          + .decrementDelayResponse

        (Expected: -, Received: +)
        """
      ]
    )
  }

  @Test func receivingWhenNothingCameFails() async {
    let issues = await collectingIssues {
      let store = TestStore(initialState: Counter.State()) { Counter() }
      await store.receive(.timerTick)
    }
    #expect(issues.map(\.message) == ["Expected to receive .timerTick, but received none."])
  }

  @Test func receivingFromAnEffectWaitingOnTheTestClockSaysSo() async {
    let clock = TestClock()
    let issues = await collectingIssues {
      let store = TestStore(initialState: Counter.State()) { Counter(clock: clock) }
      await store.send(.decrementTapped) { $0.count = -1 }
      await store.receive(.decrementDelayResponse, timeout: .milliseconds(1))
      await store.skipInFlightEffects()
    }
    #expect(issues.count == 1)
    #expect(
      issues.first?.message.contains("Effects are still running after waiting 0.001 s") == true
    )
  }

  @Test func workOutsideTheTestStoreIsAwaitedWithinTheTimeout() async {
    // A real clock: the only way this effect resumes is from outside the test executor.
    let store = TestStore(initialState: Counter.State()) { Counter(clock: ContinuousClock()) }
    await store.send(.decrementTapped) { $0.count = -1 }
    await store.receive(.decrementDelayResponse, timeout: .seconds(5)) { $0.count = 0 }
    #expect(store.outsideWorkWaits == 1)
  }

  @Test func failuresReachSwiftTestingAtTheCallersLine() async {
    await withKnownIssue {
      let store = TestStore(initialState: Counter.State()) { Counter() }
      await store.send(.incrementTapped) { $0.count = 42 }
    } matching: { issue in
      issue.comments.contains { $0.rawValue.contains("+   count: 1,") }
        && issue.sourceLocation?.fileID == #fileID
    }
  }
}

/// Three effects that each feed back three actions: their interleaving is the scheduler's.
private struct ThreeEffects: Reducer {
  typealias State = [String]
  enum Action: Equatable, Sendable {
    case start
    case step(Int, Int)
  }

  func reduce(into state: inout [String], action: Action) -> Effect<Action> {
    switch action {
    case .start:
      return .merge(
        (0..<3).map { effect in
          .run { send in
            for index in 0..<3 { await send(.step(effect, index)) }
          }
        }
      )
    case .step(let effect, let index):
      state.append("\(effect).\(index)")
      return .none
    }
  }
}

@Suite(.timeLimit(.minutes(2))) struct TestStoreDeterminism {
  @Test func aThreeEffectInterleavingHasOneTraceOver200Runs() async {
    var hashes: Set<Int> = []
    for _ in 0..<200 {
      let store = TestStore(initialState: [String]()) { ThreeEffects() }
      store.exhaustivity = .off
      await store.send(.start)
      await store.skipReceivedActions()
      hashes.insert(store.state.hashValue)
      #expect(store.state.count == 9)
    }
    #expect(hashes.count == 1)
  }

  @Test func twoTestStoresInParallelNeverSeeEachOther() async {
    async let first: [Int] = Self.countTicks(times: 3)
    async let second: [Int] = Self.countTicks(times: 5)
    let (a, b) = await (first, second)
    #expect(a == [1, 2, 3])
    #expect(b == [1, 2, 3, 4, 5])
  }

  private static func countTicks(times: Int) async -> [Int] {
    let clock = TestClock()
    let store = TestStore(initialState: Counter.State()) { Counter(clock: clock) }
    await store.send(.startTimerTapped) { $0.isTimerRunning = true }
    var counts: [Int] = []
    for tick in 1...times {
      await clock.advance(by: .seconds(1))
      await store.receive(.timerTick) { $0.count = tick }
      counts.append(store.state.count)
    }
    await store.send(.stopTimerTapped) { $0.isTimerRunning = false }
    return counts
  }
}

extension String {
  var firstLine: Substring {
    self.split(separator: "\n", maxSplits: 1).first ?? ""
  }
}

import ExampleFeatures
import Testing
import Unidirectional
import UnidirectionalTesting

/// The seeds' counter scenarios, as a user would write them.
@Suite(.timeLimit(.minutes(2))) struct CounterTests {
  @Test func decrementingBelowZeroReIncrementsAfterOneSecond() async {
    let clock = TestClock()
    let store = TestStore(initialState: Counter.State()) {
      Counter()
    } withDependencies: {
      $0.continuousClock = clock
    }
    await store.send(.decrementTapped) { $0.count = -1 }
    await clock.advance(by: .seconds(1))
    await store.receive(.decrementDelayResponse) { $0.count = 0 }
  }

  @Test func incrementingBackBeforeTheDelayCancelsIt() async {
    let clock = TestClock()
    let store = TestStore(initialState: Counter.State()) {
      Counter()
    } withDependencies: {
      $0.continuousClock = clock
    }
    await store.send(.decrementTapped) { $0.count = -1 }
    await store.send(.incrementTapped) { $0.count = 0 }
    // Passes only because the delayed effect was cancelled: the test store would otherwise
    // fail with "An effect returned for this action is still running".
  }

  @Test func withoutTheCancelTheDelayedEffectIsStillRunning() async {
    struct NoCancel: Reducer {
      var body: some Reducer<Counter.State, Counter.Action> {
        Reduce { state, action in
          // Increment without cancelling the delay: the mistake this test catches.
          if action == .incrementTapped {
            state.count += 1
            return .none
          }
          return Counter().reduce(into: &state, action: action)
        }
      }
    }
    let clock = TestClock()
    let issues = LockIsolated<[ReportedIssue]>([])
    await withIssueReporter(IssueReporter { issue in issues.withValue { $0.append(issue) } }) {
      let store = TestStore(initialState: Counter.State()) {
        NoCancel()
      } withDependencies: {
        $0.continuousClock = clock
      }
      await store.send(.decrementTapped) { $0.count = -1 }
      await store.send(.incrementTapped) { $0.count = 0 }
    }
    #expect(issues.value.count == 1)
    #expect(
      issues.value.first?.message.hasPrefix("An effect returned for this action is still running.")
        == true
    )
    #expect(issues.value.first?.message.contains("Action: .decrementTapped") == true)
  }

  @Test func theTimerSpeedsUp() async {
    let clock = TestClock()
    let store = TestStore(initialState: Counter.State()) {
      Counter()
    } withDependencies: {
      $0.continuousClock = clock
    }
    await store.send(.startTimerTapped) { $0.isTimerRunning = true }
    for (tick, milliseconds) in [1_000, 950, 900, 850, 800].enumerated() {
      await clock.advance(by: .milliseconds(milliseconds))
      await store.receive(.timerTick) { $0.count = tick + 1 }
    }
    await store.send(.stopTimerTapped) { $0.isTimerRunning = false }
    #expect(store.outsideWorkWaits == 0)
  }

  @Test func aFactComesFromTheInjectedClient() async {
    let store = TestStore(initialState: Counter.State(count: 3)) {
      Counter()
    } withDependencies: {
      $0.numberFact = NumberFactClient { "\($0) is a good number." }
    }
    await store.send(.factTapped)
    await store.receive(.factResponse("3 is a good number.")) { $0.fact = "3 is a good number." }
  }

  @Test func theUnimplementedFactClientFailsTheTest() async {
    let issues = LockIsolated<[ReportedIssue]>([])
    await withIssueReporter(IssueReporter { issue in issues.withValue { $0.append(issue) } }) {
      let store = TestStore(initialState: Counter.State(count: 3)) { Counter() }
      await store.send(.factTapped)
      await store.receive(
        .factResponse("Couldn't load a fact: 'NumberFactClient.fetch' is unimplemented")
      ) {
        $0.fact = "Couldn't load a fact: 'NumberFactClient.fetch' is unimplemented"
      }
    }
    #expect(issues.value.map(\.message) == ["Unimplemented: 'NumberFactClient.fetch' was called."])
  }

  @Test func theNthPrimeOf200ReportsProgressThenThePrime() async {
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
    let store = TestStore(initialState: Counter.State()) {
      Counter()
    } withDependencies: {
      $0.continuousClock = clock
    }
    let task = await store.send(.startTimerTapped) { $0.isTimerRunning = true }
    await clock.advance(by: .seconds(1))
    await store.receive(.timerTick) { $0.count = 1 }
    await task.cancel()
    await task.finish()
  }
}

@Suite(.timeLimit(.minutes(2))) struct NthPrimeFeatureTests {
  @Test func findsThe200thPrimeWithProgress() async {
    let store = TestStore(initialState: NthPrime.State(n: 200)) { NthPrime() }
    await store.send(.start)
    await store.receive(.progress(0.84, checked: 1_000)) {
      $0.progress = 0.84
      $0.checked = 1_000
    }
    await store.receive(.response(1223)) {
      $0.progress = 1
      $0.prime = 1223
    }
    #expect(store.outsideWorkWaits == 0)
  }

  /// Cancels while the computation runs (when its first progress arrives): nothing more arrives and
  /// its task has ended.
  ///
  /// With the cancellation not reaching the effect, 48 more progress actions and the 5,000th prime
  /// arrive and fail the test. (The old version cancelled after `send` returned, when the
  /// computation had already finished inside it.)
  @Test func cancellingMidComputationStopsIt() async {
    let store = TestStore(initialState: NthPrime.State(n: 5_000)) {
      NthPrime()
      Reduce<NthPrime.State, NthPrime.Action> { _, action in
        guard case .progress = action else { return .none }
        return .send(.cancel)  // the test's hand on the button, at the first progress
      }
    }
    let task = await store.send(.start)
    await store.receive(.progress(0.0336, checked: 1_000)) {
      $0.progress = 0.0336
      $0.checked = 1_000
    }
    await store.receive(.cancel)
    #expect(task.rawValue.isFinished)
    #expect(store.state.prime == nil)
  }
}

import Testing
import Unidirectional
import UnidirectionalTesting

/// The test store's remaining diagnostics, each triggered and its message checked.
@Suite(.timeLimit(.minutes(1))) struct TestStoreDiagnosticsTests {
  private struct AssertionError: Error, CustomStringConvertible {
    var description: String { "the expectation could not be built" }
  }

  @Test func aThrowingStateAssertionIsReportedOnSendAndOnReceive() async {
    let clock = TestClock()
    let issues = await collectingIssues {
      let store = TestStore(initialState: Counter.State()) { Counter(clock: clock) }
      await store.send(.decrementTapped) { _ in throw AssertionError() }
      await clock.advance(by: .seconds(1))
      await store.receive(.decrementDelayResponse) { _ in throw AssertionError() }
    }
    #expect(
      issues.map(\.message) == [
        "The state assertion threw an error: the expectation could not be built",
        "The state assertion threw an error: the expectation could not be built",
      ]
    )
  }

  @Test func strictSkipsReportWhenThereIsNothingToSkip() async {
    let issues = await collectingIssues {
      let store = TestStore(initialState: Counter.State()) { Counter() }
      await store.skipReceivedActions()
      await store.skipInFlightEffects()
      await store.skipReceivedActions(strict: false)
      await store.skipInFlightEffects(strict: false)
    }
    #expect(
      issues.map(\.message) == [
        "There were no received actions to skip.",
        "There were no in-flight effects to skip.",
      ]
    )
  }

  @Test func receivingWhenNoneOfSeveralReceivedActionsMatchesSaysHowMany() async {
    let issues = await collectingIssues {
      let store = TestStore(initialState: Counter.State(count: 200)) { Counter() }
      store.exhaustivity = .off
      await store.send(.nthPrimeTapped)
      await store.receive(where: { $0 == .incrementTapped })
    }
    #expect(
      issues.map(\.message) == [
        "Expected to receive an action matching the predicate, but none of the 2 received actions matched."
      ]
    )
  }

  @Test func aNonExhaustiveReceiveSkipsTheActionsBeforeTheOneItNames() async {
    let store = TestStore(initialState: Counter.State(count: 200)) { Counter() }
    store.exhaustivity = .off
    await store.send(.nthPrimeTapped)
    await store.receive(.nthPrimeResponse(1223)) { $0.fact = "The 200th prime is 1223." }
    #expect(store.state.progress == nil)
  }

  @Test func theSynchronousWithExhaustivityRestoresTheSetting() {
    let store = TestStore(initialState: Counter.State()) { Counter() }
    let inside = store.withExhaustivity(.off) { store.exhaustivity }
    #expect(inside == .off)
    #expect(store.exhaustivity == .on)
  }

  @Test func tasksOfOneSendAreEqualAndHashTheSame() async {
    let clock = TestClock()
    let store = TestStore(initialState: Counter.State()) { Counter(clock: clock) }
    let task = await store.send(.startTimerTapped) { $0.isTimerRunning = true }
    let other = await store.send(.decrementTapped) { $0.count = -1 }
    #expect(task == task && task != other)
    #expect(Set([task, task, other]).count == 2)
    await task.cancel()
    await other.cancel()
  }
}

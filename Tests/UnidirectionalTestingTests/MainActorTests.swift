import Testing
import Unidirectional
import UnidirectionalTesting

/// Tests written the Composable Architecture's way, on the main actor: stores, test stores and
/// clocks are usable from there as from anywhere.
@MainActor
@Suite(.timeLimit(.minutes(1))) struct MainActorTests {
  @Test func aTestStoreDrivesTheCounterFromTheMainActor() async {
    let clock = TestClock()
    let store = TestStore(initialState: Counter.State()) { Counter(clock: clock) }
    await store.send(.decrementTapped) { $0.count = -1 }
    await clock.advance(by: .seconds(1))
    await store.receive(.decrementDelayResponse) { $0.count = 0 }
    await store.send(.startTimerTapped) { $0.isTimerRunning = true }
    await clock.advance(by: .seconds(2))
    await store.receive(.timerTick) { $0.count = 1 }
    await store.receive(.timerTick) { $0.count = 2 }
    await store.send(.stopTimerTapped) { $0.isTimerRunning = false }
    await store.finish()
  }

  @Test func aStoreRunsAndShutsDownFromTheMainActor() async {
    let clock = TestClock()
    let store = Store(initialState: Counter.State()) { Counter(clock: clock) }
    let task = await store.send(.startTimerTapped)
    #expect(await store.state.isTimerRunning)
    task.cancel()
    await task.finish()
    let child = store.scope(state: \.count, action: { (action: Counter.Action) in action })
    await child.send(.incrementTapped)
    #expect(await child.state == 1)
    await store.shutdown()
  }
}

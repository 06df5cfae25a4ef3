// The examples of the DocC articles, compiled and run so the documentation stays true.
import Testing
import Unidirectional
import UnidirectionalTesting

/// *Getting started*'s feature.
private struct Countdown: Reducer {
  struct State: Equatable, Sendable { var remaining = 3 }
  enum Action: Equatable, Sendable { case start, tick }
  var clock: any Clock<Duration> = ContinuousClock()

  func reduce(into state: inout State, action: Action) -> Effect<Action> {
    switch action {
    case .start:
      return .run { [clock] send in
        for await _ in clock.timer(interval: .seconds(1)) { await send(.tick) }
      }
      .cancellable(id: "countdown", cancelInFlight: true)
    case .tick:
      state.remaining -= 1
      return state.remaining == 0 ? .cancel(id: "countdown") : .none
    }
  }
}

@Suite(.timeLimit(.minutes(1))) struct DocumentationExampleTests {
  /// *Getting started*: "Test it".
  @Test func countsDownThenStops() async {
    let clock = TestClock()
    let store = TestStore(initialState: Countdown.State()) { Countdown(clock: clock) }
    await store.send(.start)
    await clock.advance(by: .seconds(3))
    await store.receive(.tick) { $0.remaining = 2 }
    await store.receive(.tick) { $0.remaining = 1 }
    await store.receive(.tick) { $0.remaining = 0 }
  }

  /// *Getting started*: "Run it", with an immediate clock instead of waiting three seconds.
  @Test func runningItEndsAtZero() async {
    let store = Store(initialState: Countdown.State()) { Countdown(clock: ImmediateClock()) }
    let task = await store.send(.start)
    await task.finish()
    #expect(await store.state.remaining == 0)
    await store.shutdown()
  }
}

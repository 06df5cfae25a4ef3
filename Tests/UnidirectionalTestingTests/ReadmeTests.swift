// The README's example, compiled and run so the first screen stays true.
import Testing
import Unidirectional
import UnidirectionalTesting

struct ReadmeCounter: Reducer {
  struct State: Equatable, Sendable { var count = 0 }
  enum Action: Equatable, Sendable { case decrementTapped, incrementTapped, delayedIncrement }
  enum CancelID { case delay }
  var clock: any Clock<Duration> = ContinuousClock()

  func reduce(into state: inout State, action: Action) -> Effect<Action> {
    switch action {
    case .decrementTapped:
      state.count -= 1
      guard state.count < 0 else { return .none }
      return .run { [clock] send in
        try await clock.sleep(for: .seconds(1))
        await send(.delayedIncrement)
      }
      .cancellable(id: CancelID.delay)
    case .incrementTapped, .delayedIncrement:
      state.count += 1
      return state.count >= 0 ? .cancel(id: CancelID.delay) : .none
    }
  }
}

@Suite(.timeLimit(.minutes(2))) struct ReadmeTests {
  @Test func theFeatureRunsInAStore() async {
    let store = Store(initialState: ReadmeCounter.State()) { ReadmeCounter() }
    await store.send(.decrementTapped)  // count -1; one second later, back to 0
    #expect(await store.state.count == -1)
    await store.shutdown()
  }

  @Test func theTestFromTheReadme() async {
    let clock = TestClock()
    let store = TestStore(initialState: ReadmeCounter.State()) { ReadmeCounter(clock: clock) }
    await store.send(.decrementTapped) { $0.count = -1 }
    await clock.advance(by: .seconds(1))
    await store.receive(.delayedIncrement) { $0.count = 0 }
  }
}

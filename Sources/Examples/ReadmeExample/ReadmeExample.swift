import Unidirectional

struct Counter: Reducer {
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

@main
struct CounterApp {
  static func main() async {
    let store = Store(initialState: Counter.State()) { Counter() }
    let task = await store.send(.decrementTapped)
    print("count:", await store.state.count)  // count: -1
    await task.finish()  // one second later the effect sends .delayedIncrement
    print("count:", await store.state.count)  // count: 0
    await store.shutdown()
  }
}

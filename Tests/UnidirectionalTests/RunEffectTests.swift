import Testing
import Unidirectional

/// A feature with both forms of `.run`.
///
/// One form is for a body that cannot throw (run as it is), the other for a body that can (wrapped
/// to catch and report its errors). Swift picks by the body; both behave the same.
private struct Runner: Reducer {
  struct State: Equatable, Sendable {
    var log: [String] = []
  }

  enum Action: Equatable, Sendable {
    case quiet
    case throwing
    case failing
    case logged(String)
  }

  struct Failure: Error {}

  func reduce(into state: inout State, action: Action) -> Effect<Action> {
    switch action {
    case .quiet:
      return .run(priority: .high) { send in
        await send(.logged("quiet at \(Task.currentPriority == .high ? "high" : "other")"))
      }
    case .throwing:
      return .run(priority: .low) { send in
        try Task.checkCancellation()
        await send(.logged("throwing at \(Task.currentPriority == .low ? "low" : "other")"))
      }
    case .failing:
      return .run { _ in
        throw Failure()
      } catch: { error, send in
        await send(.logged("caught \(error is Failure)"))
      }
    case .logged(let line):
      state.log.append(line)
      return .none
    }
  }
}

@Suite(.timeLimit(.minutes(1))) struct RunEffectTests {
  @Test func bothFormsRunAtTheirPrioritySendAndCatch() async {
    let store = Store(initialState: Runner.State()) { Runner() }
    await store.send(.quiet).finish()
    await store.send(.throwing).finish()
    await store.send(.failing).finish()
    #expect(await store.state.log == ["quiet at high", "throwing at low", "caught true"])
  }

  @Test func aBodyThatCannotThrowSendsNothingOnceCancelled() async {
    let started = Latch()
    let proceed = Latch()
    let store = Store(initialState: Runner.State()) {
      Reduce<Runner.State, Runner.Action> { state, action in
        switch action {
        case .quiet:
          return .run { send in
            started.open()
            await proceed.wait()
            await send(.logged("after cancel"))
          }
          .cancellable(id: "quiet")
        case .logged(let line):
          state.log.append(line)
          return .none
        case .throwing, .failing:
          return .none
        }
      }
    }
    let task = await store.send(.quiet)
    await started.wait()
    task.cancel()
    proceed.open()
    await task.finish()
    #expect(await store.state.log.isEmpty)
  }
}

import Testing
import Unidirectional
import UnidirectionalTesting

/// Three effects that each send three actions: on the global pool their interleaving varies.
private struct Interleaving: Reducer {
  typealias State = [String]

  enum Action: Sendable {
    case start
    case step(effect: Int, index: Int)
  }

  func reduce(into state: inout [String], action: Action) -> Effect<Action> {
    switch action {
    case .start:
      state.append("start")
      return .merge(
        (0..<3).map { effect in
          .run { send in
            for index in 0..<3 {
              await send(.step(effect: effect, index: index))
            }
          }
        }
      )
    case .step(let effect, let index):
      state.append("\(effect).\(index)")
      return .none
    }
  }
}

@Suite(.timeLimit(.minutes(1)))
struct ManualExecutorTests {
  @Test func sendEffectSendBackCompletesByDrainingWithOneTrace() async {
    var traces: Set<[String]> = []
    for _ in 0..<1_000 {
      let executor = ManualExecutor()
      let store = Store(
        initialState: [],
        reducer: Interleaving(),
        configuration: StoreConfiguration(executorPreference: executor)
      )
      defer { tearDown(store, on: executor) }
      // Only `send` is awaited: the effects finish because the executor is drained to idle.
      await executor.perform { await store.send(.start) }
      #expect(executor.pendingJobCount == 0)
      #expect(store.liveEffectCount == 0)
      traces.insert(await executor.perform { await store.state })
    }
    #expect(traces.count == 1)
    #expect(traces.first?.count == 10)
  }

  @Test func storeReducesOnTheDrainingThread() async {
    let executor = ManualExecutor()
    let onExecutor = LockIsolated<[Bool]>([])
    let store = Store(
      initialState: 0,
      reducer: Reduce<Int, Int> { state, action in
        onExecutor.withValue { $0.append(executor.isDrainingOnCurrentThread) }
        state += action
        return action > 0 ? .run { send in await send(action - 1) } : .none
      },
      configuration: StoreConfiguration(executorPreference: executor)
    )
    defer { tearDown(store, on: executor) }
    await executor.perform { await store.send(3) }
    #expect(onExecutor.value == [true, true, true, true])
    #expect(await executor.perform { await store.state } == 6)
  }
}

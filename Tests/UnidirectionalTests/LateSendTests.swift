import Testing
import Unidirectional
import UnidirectionalTesting

/// A `Send` kept past its effect (a misuse): reported, never a crash, and it keeps nothing alive.
@Suite(.timeLimit(.minutes(2))) struct LateSendTests {
  private enum Action: Sendable, Equatable {
    case start
    case late
  }

  private final class Token: Sendable {
    let released: LockIsolated<Bool>
    init(released: LockIsolated<Bool>) { self.released = released }
    deinit { self.released.setValue(true) }
  }

  private struct State: Sendable {
    var actions: [Action] = []
    let token: Token
  }

  /// A reducer that keeps, through a dependency-like box it captures, the `Send` of its effect.
  private static func feature(keeping kept: LockIsolated<Send<Action>?>) -> Reduce<State, Action> {
    Reduce { state, action in
      state.actions.append(action)
      guard action == .start else { return .none }
      return .run { send in kept.setValue(send) }
    }
  }

  @Test func aSendUsedAfterItsEffectReturnedIsReportedAndDropped() async {
    let kept = LockIsolated<Send<Action>?>(nil)
    let (actions, issues) = await collectingIssues {
      let store = Store(initialState: State(token: Token(released: LockIsolated(false)))) {
        Self.feature(keeping: kept)
      }
      await store.send(.start).finish()
      await kept.value?(.late)
      return await store.state.actions
    }
    #expect(issues.map(\.message.firstLine) == ["An action was sent from a completed effect."])
    #expect(issues.first?.message.contains("Action:\n    .late") == true)
    #expect(actions == [.start])
  }

  @Test func aSendUsedAfterItsStoreWasReleasedDoesNotCrash() async {
    let kept = LockIsolated<Send<Action>?>(nil)
    let stateReleased = LockIsolated(false)
    let executor = ManualExecutor()
    weak var released: Store<State, Action>?
    do {
      let state = State(token: Token(released: stateReleased))
      let store = Store(
        initialState: state,
        reducer: Self.feature(keeping: kept),
        configuration: StoreConfiguration(executorPreference: executor)
      )
      released = store
      await executor.perform { await store.send(.start).finish() }
    }
    #expect(released == nil)
    // Releasing the store shut its effects down; once its root task has ended (drained here),
    // the core and its state are freed.
    executor.drainUntilIdle()
    #expect(stateReleased.value)
    let (_, issues) = await collectingIssues {
      await kept.value?(.late)
    }
    kept.setValue(nil)
    #expect(issues.map(\.message.firstLine) == ["An action was sent from a completed effect."])
  }

  /// The store's reducer keeps the `Send`, which refers back to the store's core: releasing the
  /// store must still free its state (no reference cycle through the `Send`).
  @Test func aSendKeptByTheReducerDoesNotKeepTheStoresStateAlive() async {
    let kept = LockIsolated<Send<Action>?>(nil)
    let stateReleased = LockIsolated(false)
    let executor = ManualExecutor()
    do {
      let state = State(token: Token(released: stateReleased))
      let store = Store(
        initialState: state,
        reducer: Self.feature(keeping: kept),
        configuration: StoreConfiguration(executorPreference: executor)
      )
      await executor.perform { await store.send(.start).finish() }
    }
    executor.drainUntilIdle()
    #expect(kept.value != nil)
    #expect(stateReleased.value)
  }

  /// The effect's body captures the box that keeps its `Send`: once the effect has returned, the
  /// `Send` no longer holds the body, so the box and what the body captured are freed (no cycle
  /// box → Send → effect → body → box).
  @Test func aSendKeptInABoxItsOwnEffectCapturedDoesNotKeepThatEffectAlive() async {
    let captureReleased = LockIsolated(false)
    let executor = ManualExecutor()
    weak var weakBox: LockIsolated<Send<Action>?>?
    do {
      let kept = LockIsolated<Send<Action>?>(nil)
      weakBox = kept
      let capture = Token(released: captureReleased)
      let store = Store(
        initialState: State(token: Token(released: LockIsolated(false))),
        reducer: Reduce<State, Action> { _, action in
          guard action == .start else { return .none }
          return .run { send in
            _ = capture
            kept.setValue(send)
          }
        },
        configuration: StoreConfiguration(executorPreference: executor)
      )
      await executor.perform { await store.send(.start).finish() }
      #expect(kept.value != nil)
    }
    // The store's root task lets go of its reducer (which captured both) once drained.
    executor.drainUntilIdle()
    #expect(captureReleased.value)
    #expect(weakBox == nil)
  }
}

extension String {
  fileprivate var firstLine: Substring {
    self.split(separator: "\n", maxSplits: 1).first ?? ""
  }
}

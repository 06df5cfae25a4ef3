import Testing
import Unidirectional

/// A `Send` kept past its effect (a misuse): never a crash, and it keeps nothing alive.
@Suite struct LateSendTests {
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

  @Test func aSendUsedAfterItsStoreWasReleasedDoesNotCrash() async {
    let kept = LockIsolated<Send<Action>?>(nil)
    let stateReleased = LockIsolated(false)
    weak var released: Store<State, Action>?
    do {
      let state = State(token: Token(released: stateReleased))
      let store = Store(initialState: state) { Self.feature(keeping: kept) }
      released = store
      await store.send(.start).finish()
    }
    #expect(released == nil)
    await kept.value?(.late)
    kept.setValue(nil)
    #expect(stateReleased.value)
  }

  /// The store's reducer keeps the `Send`, which refers back to the store's core: releasing the
  /// store must still free its state (no reference cycle through the `Send`).
  @Test func aSendKeptByTheReducerDoesNotKeepTheStoresStateAlive() async {
    let kept = LockIsolated<Send<Action>?>(nil)
    let stateReleased = LockIsolated(false)
    do {
      let state = State(token: Token(released: stateReleased))
      let store = Store(initialState: state) { Self.feature(keeping: kept) }
      await store.send(.start).finish()
    }
    #expect(kept.value != nil)
    #expect(stateReleased.value)
  }
}

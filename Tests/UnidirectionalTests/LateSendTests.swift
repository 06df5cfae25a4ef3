import Testing
import Unidirectional

/// A `Send` kept past its effect (a misuse): never a crash, whatever happened to the store.
@Suite struct LateSendTests {
  private enum Action: Sendable, Equatable {
    case start
    case late
  }

  private static func feature(
    keeping kept: LockIsolated<Send<Action>?>
  ) -> Reduce<[Action], Action> {
    Reduce { state, action in
      state.append(action)
      guard action == .start else { return .none }
      return .run { send in kept.setValue(send) }
    }
  }

  @Test func aSendUsedAfterItsStoreWasReleasedDoesNotCrash() async {
    let kept = LockIsolated<Send<Action>?>(nil)
    weak var released: Store<[Action], Action>?
    do {
      let store = Store(initialState: [Action]()) { Self.feature(keeping: kept) }
      released = store
      await store.send(.start).finish()
    }
    #expect(released == nil)
    await kept.value?(.late)
  }
}

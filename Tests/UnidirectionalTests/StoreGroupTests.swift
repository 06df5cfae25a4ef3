import Testing
import Unidirectional
import UnidirectionalTesting

/// Shutting many stores down together, and sending that expects rejection.
@Suite(.timeLimit(.minutes(1))) struct StoreGroupTests {
  enum Action: Sendable, Equatable {
    case start
    case quick
    case done
  }

  struct State: Sendable, Equatable {
    var done = 0
  }

  static var feature: Reduce<State, Action> {
    Reduce { state, action in
      switch action {
      case .start:
        return .run { _ in await untilCancelled() }
      case .quick:
        return .run { send in await send(.done) }
      case .done:
        state.done += 1
        return .none
      }
    }
  }

  @Test func shuttingDownAGroupShutsDownEveryStoreAndCancelsTheirEffects() async {
    let group = StoreGroup()
    var stores: [Store<State, Action>] = []
    for _ in 0..<100 {
      let store = Store(initialState: State()) { Self.feature }
      #expect(group.insert(store))
      await store.send(.start)
      stores.append(store)
    }
    #expect(group.count == 100)
    let closed = await group.shutdown(gracePeriod: .zero)
    #expect(closed == 100)
    for store in stores {
      #expect(await store.isShutDown)
      #expect(store.liveEffectCount == 0)
    }
    #expect(group.count == 0)
  }

  @Test func effectsThatEndWithinTheGracePeriodStillDeliver() async {
    let group = StoreGroup()
    let (gate, open) = AsyncStream.makeStream(of: Void.self)
    let store = Store(initialState: State()) {
      Reduce<State, Action> { state, action in
        switch action {
        case .start:
          return .run { send in
            for await _ in gate { break }
            await send(.done)
          }
        case .quick:
          return .none
        case .done:
          state.done += 1
          return .none
        }
      }
    }
    group.insert(store)
    await store.send(.start)
    open.yield()
    await group.shutdown(gracePeriod: .seconds(30))
    #expect(await store.state.done == 1)
  }

  @Test func aGroupShuttingDownRefusesNewStores() async {
    let group = StoreGroup()
    await group.shutdown(gracePeriod: .zero)
    #expect(group.isShuttingDown)
    let late = Store(initialState: State()) { Self.feature }
    #expect(group.insert(late) == false)
    #expect(group.count == 0)
  }

  @Test func aReleasedStoreLeavesTheGroupByItself() async {
    let group = StoreGroup()
    let kept = Store(initialState: State()) { Self.feature }
    group.insert(kept)
    do {
      let released = Store(initialState: State()) { Self.feature }
      group.insert(released)
      #expect(group.count == 2)
    }
    #expect(group.count == 1)
    group.remove(kept)
    #expect(group.count == 0)
    #expect(await group.shutdown(gracePeriod: .zero) == 0)
    #expect(await kept.isShutDown == false)
  }

  @Test func trySendIsQuietAfterShutdownWhereSendReports() async {
    let store = Store(initialState: State()) { Self.feature }
    #expect(await store.trySend(.quick) != nil)
    await store.shutdown()
    let (accepted, quietIssues) = await collectingIssues {
      await store.trySend(.quick) != nil
    }
    #expect(accepted == false)
    #expect(quietIssues.isEmpty)
    let (_, issues) = await collectingIssues {
      await store.send(.quick)
    }
    #expect(issues.count == 1)
  }
}

/// Suspends until the task is cancelled (an effect that runs until something stops it), with no
/// clock involved.
func untilCancelled() async {
  let (never, continuation) = AsyncStream.makeStream(of: Void.self)
  for await _ in never {}  // ends when the task is cancelled
  continuation.finish()  // NB: after the loop: dropping the continuation would end it at once
}

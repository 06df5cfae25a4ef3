import Testing
import Unidirectional
import UnidirectionalTesting

/// Effects run concurrently unless queued: `Effect.queued(id:)` runs them in the order they were
/// returned, and the test store's `.newestFirst` scheduling exposes tests that assume an order
/// the store does not promise.
@Suite(.timeLimit(.minutes(1))) struct OrderedEffectsTests {
  /// A connection's commands: `slow` replies after a delay, `fast` at once.
  struct Commands: Reducer {
    struct State: Equatable, Sendable {}
    enum Action: Equatable, Sendable {
      case slow
      case fast
      case both
      case cancelFast
      case reply(String)
    }
    enum QueueID { case replies }
    enum CancelID { case fast }

    let clock: TestClock
    let queued: Bool

    func reduce(into state: inout State, action: Action) -> Effect<Action> {
      switch action {
      case .slow:
        return self.ordered(
          .run { [clock] send in
            try await clock.sleep(for: .seconds(1))
            await send(.reply("slow"))
          }
        )
      case .fast:
        return self.ordered(.run { send in await send(.reply("fast")) })
          .cancellable(id: CancelID.fast)
      case .both:
        return .merge(
          self.ordered(.run { send in await send(.reply("first")) }),
          self.ordered(.run { send in await send(.reply("second")) })
        )
      case .cancelFast:
        return .cancel(id: CancelID.fast)
      case .reply:
        return .none
      }
    }

    private func ordered(_ effect: Effect<Action>) -> Effect<Action> {
      self.queued ? effect.queued(id: QueueID.replies) : effect
    }
  }

  @Test func effectsOfConsecutiveActionsRunConcurrentlyByDefault() async {
    let clock = TestClock()
    let store = TestStore(initialState: Commands.State()) {
      Commands(clock: clock, queued: false)
    }
    await store.send(.slow)
    await store.send(.fast)
    await store.receive(.reply("fast"))
    await clock.advance(by: .seconds(1))
    await store.receive(.reply("slow"))
  }

  @Test func queuedEffectsRunInTheOrderTheyWereReturned() async {
    let clock = TestClock()
    let store = TestStore(initialState: Commands.State()) {
      Commands(clock: clock, queued: true)
    }
    await store.send(.slow)
    await store.send(.fast)
    // The fast reply waits for the slow one.
    await clock.advance(by: .seconds(1))
    await store.receive(.reply("slow"))
    await store.receive(.reply("fast"))
  }

  @Test func newestFirstSchedulingExposesAnAssumedOrder() async {
    let clock = TestClock()
    let store = TestStore(initialState: Commands.State()) {
      Commands(clock: clock, queued: false)
    }
    store.scheduling = .newestFirst
    #expect(store.scheduling == .newestFirst)
    await store.send(.both)
    let issues = await collectingIssues {
      await store.receive(.reply("first"))
    }
    #expect(issues.count == 1)
    #expect(issues.first?.message.contains(#"reply("second")"#) == true)
    await store.receive(.reply("first"))
  }

  @Test func oldestFirstSchedulingHappensToKeepConcurrentEffectsInOrder() async {
    let clock = TestClock()
    let store = TestStore(initialState: Commands.State()) {
      Commands(clock: clock, queued: false)
    }
    #expect(store.scheduling == .oldestFirst)
    await store.send(.both)
    await store.receive(.reply("first"))
    await store.receive(.reply("second"))
  }

  @Test func queuedEffectsKeepTheirOrderUnderEitherScheduling() async {
    for scheduling in [
      TestStore<Commands.State, Commands.Action>.Scheduling.oldestFirst, .newestFirst,
    ] {
      let clock = TestClock()
      let store = TestStore(initialState: Commands.State()) {
        Commands(clock: clock, queued: true)
      }
      store.scheduling = scheduling
      await store.send(.both)
      await store.receive(.reply("first"))
      await store.receive(.reply("second"))
    }
  }

  @Test func aCancelledEffectWaitingInTheQueueIsSkippedAndTheQueueMovesOn() async {
    let clock = TestClock()
    let store = TestStore(initialState: Commands.State()) {
      Commands(clock: clock, queued: true)
    }
    await store.send(.slow)
    await store.send(.fast)
    await store.send(.both)
    await store.send(.cancelFast)
    await clock.advance(by: .seconds(1))
    await store.receive(.reply("slow"))
    await store.receive(.reply("first"))
    await store.receive(.reply("second"))
  }

  @Test func shuttingDownWithEffectsWaitingInAQueueEndsThemAll() async {
    let clock = TestClock()
    let reduced = LockIsolated<[Commands.Action]>([])
    let store = Store(initialState: Commands.State()) {
      Reduce<Commands.State, Commands.Action> { _, action in
        reduced.withValue { $0.append(action) }
        return .none
      }
      Commands(clock: clock, queued: true)
    }
    await store.send(.slow)
    await store.send(.fast)
    await store.send(.both)
    await store.shutdown()
    #expect(store.liveEffectCount == 0)
    #expect(reduced.value == [.slow, .fast, .both])
  }
}

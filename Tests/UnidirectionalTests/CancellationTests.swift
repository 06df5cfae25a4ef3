import Testing
import Unidirectional
import UnidirectionalTesting

/// A feature for the cancellation rules: effects that record when they start and emit.
private struct Canceller: Reducer {
  struct State: Equatable, Sendable {
    var log: [String] = []
  }

  enum Action: Equatable, Sendable {
    case startAndCancelInOneMerge
    case start(String)
    case cancel(String)
    case concatenateThenCancelSecond
    case first
    case emitted(String)
    case sleep(String)
    case slept(String)
    case partialCancellation
    case search(String)
    case results(String)
  }

  let clock: any Clock<Duration>
  let started: LockIsolated<[String]>

  func reduce(into state: inout State, action: Action) -> Effect<Action> {
    switch action {
    case .startAndCancelInOneMerge:
      return .merge(self.work("merged").cancellable(id: "X"), .cancel(id: "X"))
    case .start(let id):
      return self.work(id).cancellable(id: id)
    case .cancel(let id):
      return .cancel(id: id)
    case .concatenateThenCancelSecond:
      return .concatenate(
        .run { send in await send(.first) },
        self.work("second").cancellable(id: "second")
      )
    case .first:
      state.log.append("first")
      return .cancel(id: "second")
    case .emitted(let id):
      state.log.append("emitted \(id)")
      return .none
    case .sleep(let id):
      return .run { [clock, started] send in
        do {
          try await clock.sleep(for: .seconds(10))
          await send(.slept(id))
        } catch is CancellationError {
          started.withValue {
            $0.append("\(id) saw CancellationError, isCancelled \(Task.isCancelled)")
          }
        }
      }
      .cancellable(id: id)
    case .slept(let id):
      state.log.append("slept \(id)")
      return .none
    case .partialCancellation:
      return .run { [clock] send in
        try? await withTaskCancellation(id: "block") {
          try await clock.sleep(for: .seconds(10))
          await send(.emitted("block"))
        }
        await send(.emitted("after block"))
      }
    case .search(let query):
      state.log.append("query \(query)")
      return .run { [clock] send in
        try await clock.sleep(for: .milliseconds(300))
        await send(.results(query))
      }
      .cancellable(id: "search", cancelInFlight: true)
    case .results(let query):
      state.log.append("results \(query)")
      return .none
    }
  }

  func work(_ id: String) -> Effect<Action> {
    .run { [started] send in
      started.withValue { $0.append(id) }
      await send(.emitted(id))
    }
  }
}

@Suite(.timeLimit(.minutes(2))) struct CancellationRules {
  private func makeStore(
    clock: TestClock = TestClock(),
    started: LockIsolated<[String]> = LockIsolated([])
  ) -> TestStore<Canceller.State, Canceller.Action> {
    TestStore(initialState: Canceller.State()) { Canceller(clock: clock, started: started) }
  }

  @Test func rule1_equalIDsInTwoStoresNeverTouchEachOther() async {
    let clock = TestClock()
    let started = LockIsolated<[String]>([])
    let first = self.makeStore(clock: clock, started: started)
    let second = self.makeStore(clock: clock, started: started)
    await first.send(.sleep("shared"))
    await second.send(.sleep("shared"))
    await second.send(.cancel("shared"))
    #expect(started.value == ["shared saw CancellationError, isCancelled true"])
    await clock.advance(by: .seconds(10))
    await first.receive(.slept("shared")) { $0.log = ["slept shared"] }
  }

  @Test func rule2_aCancelInTheSameMergePreventsTheWorkFromRunning() async {
    let started = LockIsolated<[String]>([])
    let store = self.makeStore(started: started)
    await store.send(.startAndCancelInOneMerge)
    #expect(started.value.isEmpty)
  }

  @Test func rule2_aCancelInTheNextActionPreventsTheWorkFromRunning() async {
    let executor = ManualExecutor()
    let started = LockIsolated<[String]>([])
    let store = Store(
      initialState: Canceller.State(),
      reducer: Canceller(clock: TestClock(), started: started),
      configuration: StoreConfiguration(executorPreference: executor)
    )
    defer { tearDown(store, on: executor) }
    await executor.perform {
      await store.send(.start("A"))
      await store.send(.cancel("A"))
    }
    #expect(started.value.isEmpty)
    #expect(await executor.perform { await store.state.log }.isEmpty)
    #expect(store.liveEffectCount == 0)
    #expect(store.registeredIdentifierCount == 0)
  }

  @Test func rule2_aCancelCanTargetALaterPartOfAConcatenation() async {
    let started = LockIsolated<[String]>([])
    let store = self.makeStore(started: started)
    await store.send(.concatenateThenCancelSecond)
    await store.receive(.first) { $0.log = ["first"] }
    #expect(started.value.isEmpty)
  }

  @Test func rule4_cancelledWorkSeesCancellationAndFinishes() async {
    let started = LockIsolated<[String]>([])
    let store = self.makeStore(started: started)
    let task = await store.send(.sleep("nap"))
    await store.send(.cancel("nap"))
    #expect(started.value == ["nap saw CancellationError, isCancelled true"])
    #expect(task.rawValue.isFinished)
  }

  @Test func rule5_searchAsYouTypeKeepsOnlyTheLastQuery() async {
    let clock = TestClock()
    let store = self.makeStore(clock: clock)
    await store.send(.search("s")) { $0.log = ["query s"] }
    await clock.advance(by: .milliseconds(200))
    await store.send(.search("sw")) { $0.log.append("query sw") }
    await clock.advance(by: .milliseconds(200))
    await store.send(.search("swi")) { $0.log.append("query swi") }
    await clock.advance(by: .milliseconds(300))
    await store.receive(.results("swi")) { $0.log.append("results swi") }
  }

  @Test func rule6_withTaskCancellationCancelsOnlyTheBlock() async {
    let store = self.makeStore()
    await store.send(.partialCancellation)
    await store.send(.cancel("block"))
    await store.receive(.emitted("after block")) { $0.log = ["emitted after block"] }
  }

  @Test func cancelIDsCancelsEveryNamedEffectAndNoOther() async {
    let clock = TestClock()
    let started = LockIsolated<[String]>([])
    let store = TestStore(initialState: Canceller.State()) {
      Reduce<Canceller.State, Canceller.Action> { state, action in
        if case .cancel = action { return .cancel(ids: ["a", "b"]) }
        return Canceller(clock: clock, started: started).reduce(into: &state, action: action)
      }
    }
    await store.send(.sleep("a"))
    await store.send(.sleep("b"))
    await store.send(.sleep("c"))
    #expect(clock.sleeperCount == 3)
    await store.send(.cancel("a and b"))
    #expect(clock.sleeperCount == 1)
    #expect(
      started.value.sorted() == [
        "a saw CancellationError, isCancelled true", "b saw CancellationError, isCancelled true",
      ]
    )
    await clock.advance(by: .seconds(10))
    await store.receive(.slept("c")) { $0.log = ["slept c"] }
  }

  @Test func rule7_cancellingAnUnknownIDIsAQuietNoOp() async {
    let (_, issues) = await collectingIssues {
      let store = self.makeStore()
      await store.send(.cancel("nobody"))
    }
    #expect(issues.isEmpty)
  }

  @Test func rule7_theRegistryIsEmptyOnceEffectsEnd() async {
    let executor = ManualExecutor()
    let clock = TestClock()
    let store = Store(
      initialState: Canceller.State(),
      reducer: Canceller(clock: clock, started: LockIsolated([])),
      configuration: StoreConfiguration(executorPreference: executor)
    )
    defer { tearDown(store, on: executor) }
    await executor.perform {
      for index in 0..<100 { await store.send(.sleep("\(index % 10)")) }
    }
    #expect(store.registeredIdentifierCount == 10)
    #expect(store.liveEffectCount == 100)
    await executor.perform { await store.send(.cancel("3")) }
    #expect(store.registeredIdentifierCount == 9)
    await clock.advance(by: .seconds(10))
    #expect(store.liveEffectCount == 0)
    #expect(store.registeredIdentifierCount == 0)
  }

  @Test func idsAreKeyedByTypeAndValue() async {
    let started = LockIsolated<[String]>([])
    let clock = TestClock()
    let store = TestStore(initialState: 0) {
      Reduce<Int, Int> { _, action in
        switch action {
        case 0:
          return .run { _ in
            do { try await clock.sleep(for: .seconds(1)) } catch {
              started.withValue { $0.append("int cancelled") }
            }
          }
          .cancellable(id: 1)
        default:
          return .cancel(id: "1")
        }
      }
    }
    await store.send(0)
    await store.send(1)
    #expect(started.value.isEmpty)
    await clock.advance(by: .seconds(1))
    await store.finish()
  }
}

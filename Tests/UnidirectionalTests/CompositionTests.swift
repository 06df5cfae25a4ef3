import Testing
import Unidirectional
import UnidirectionalTesting

private struct Child: Reducer {
  struct State: Equatable, Sendable, Identifiable {
    var id: Int = 0
    var count = 0
  }

  enum Action: Equatable, Sendable {
    case increment
    case startTimer
    case tick
  }

  let clock: TestClock

  func reduce(into state: inout State, action: Action) -> Effect<Action> {
    switch action {
    case .increment, .tick:
      state.count += 1
      return .none
    case .startTimer:
      return .run { [clock] send in
        for await _ in clock.timer(interval: .seconds(1)) { await send(.tick) }
      }
    }
  }
}

private struct Parent: Reducer {
  struct State: Equatable, Sendable {
    var child = Child.State()
    var optional: Child.State?
    var rows: IdentifiedArrayOf<Child.State> = []
    var log: [String] = []
  }

  enum Action: Equatable, Sendable {
    case child(Child.Action)
    case optional(Child.Action)
    case rows(id: Int, action: Child.Action)
    case present
    case dismiss
    case removeRow(Int)

    var child: Child.Action? {
      get { if case .child(let action) = self { action } else { nil } }
      set { if let newValue { self = .child(newValue) } }
    }
    var optional: Child.Action? {
      get { if case .optional(let action) = self { action } else { nil } }
      set { if let newValue { self = .optional(newValue) } }
    }
    var rows: (id: Int, action: Child.Action)? {
      get { if case .rows(let id, let action) = self { (id, action) } else { nil } }
      set { if let newValue { self = .rows(id: newValue.id, action: newValue.action) } }
    }
  }

  let clock: TestClock

  var body: some Reducer<State, Action> {
    Scope(state: \.child, action: \.child) { Child(clock: self.clock) }
    Reduce { state, action in
      switch action {
      case .child(.increment):
        state.log.append("parent saw child count \(state.child.count)")
        return .none
      case .present:
        state.optional = Child.State()
        return .none
      case .dismiss:
        state.optional = nil
        return .none
      case .removeRow(let id):
        state.rows[id: id] = nil
        return .none
      default:
        return .none
      }
    }
    .ifLet(\.optional, action: \.optional) { Child(clock: self.clock) }
    .forEach(\.rows, action: \.rows) { Child(clock: self.clock) }
  }
}

@Suite(.timeLimit(.minutes(2))) struct CompositionTests {
  @Test func scopeRunsTheChildBeforeTheParentAndMapsItsEffects() async {
    let clock = TestClock()
    let store = TestStore(initialState: Parent.State()) { Parent(clock: clock) }
    await store.send(.child(.increment)) {
      $0.child.count = 1
      $0.log = ["parent saw child count 1"]
    }
    let task = await store.send(.child(.startTimer))
    await clock.advance(by: .seconds(1))
    await store.receive(.child(.tick)) { $0.child.count = 2 }
    await task.cancel()
  }

  @Test func scopeWithACasePath() async {
    let store = TestStore(initialState: Child.State()) {
      Scope(
        state: \Child.State.self,
        action: AnyCasePath<Child.Action, Child.Action>(embed: { $0 }, extract: { $0 })
      ) {
        Child(clock: TestClock())
      }
    }
    await store.send(.increment) { $0.count = 1 }
  }

  @Test func dismissingTheChildCancelsItsEffects() async {
    let clock = TestClock()
    let store = TestStore(initialState: Parent.State()) { Parent(clock: clock) }
    await store.send(.present) { $0.optional = Child.State() }
    await store.send(.optional(.startTimer))
    await clock.advance(by: .seconds(1))
    await store.receive(.optional(.tick)) { $0.optional?.count = 1 }
    await store.send(.dismiss) { $0.optional = nil }
    #expect(clock.sleeperCount == 0)
  }

  @Test func aChildActionWhileTheChildIsNilIsReportedAndDropped() async {
    let (_, issues) = await collectingIssues {
      let store = TestStore(initialState: Parent.State()) { Parent(clock: TestClock()) }
      await store.send(.optional(.increment))
    }
    #expect(issues.count == 1)
    #expect(
      issues.first?.message.hasPrefix(
        "An 'ifLet' received a child action when the child state was 'nil'."
      ) == true
    )
    #expect(issues.first?.message.contains("Action: .increment") == true)
  }

  @Test func forEachRunsTheRowAndRemovingItCancelsItsEffects() async {
    let clock = TestClock()
    var initial = Parent.State()
    initial.rows = [Child.State(id: 1), Child.State(id: 2)]
    let store = TestStore(initialState: initial) { Parent(clock: clock) }
    await store.send(.rows(id: 2, action: .increment)) { $0.rows[id: 2]?.count = 1 }
    await store.send(.rows(id: 1, action: .startTimer))
    await store.send(.rows(id: 2, action: .startTimer))
    await clock.advance(by: .seconds(1))
    await store.receive(.rows(id: 1, action: .tick)) { $0.rows[id: 1]?.count = 1 }
    await store.receive(.rows(id: 2, action: .tick)) { $0.rows[id: 2]?.count = 2 }
    await store.send(.removeRow(1)) { $0.rows[id: 1] = nil }
    #expect(clock.sleeperCount == 1)
    await store.send(.removeRow(2)) { $0.rows[id: 2] = nil }
    #expect(clock.sleeperCount == 0)
  }

  @Test func anActionForAMissingRowIsReportedAndDropped() async {
    let (_, issues) = await collectingIssues {
      let store = TestStore(initialState: Parent.State()) { Parent(clock: TestClock()) }
      await store.send(.rows(id: 7, action: .increment))
    }
    #expect(issues.count == 1)
    #expect(
      issues.first?.message.hasPrefix(
        "A 'forEach' received an action for an element that is not in the collection."
      ) == true
    )
  }

  @Test func aScopedStoreSharesItsParentsStateEffectsAndCancellation() async {
    let executor = ManualExecutor()
    let clock = TestClock()
    let store = Store(
      initialState: Parent.State(),
      reducer: Parent(clock: clock),
      configuration: StoreConfiguration(executorPreference: executor)
    )
    defer { tearDown(store, on: executor) }
    let child = store.scope(state: \.child, action: Parent.Action.child)
    let task = await executor.perform { await child.send(.startTimer) }
    await executor.perform { await child.send(.increment) }
    #expect(await executor.perform { await child.state.count } == 1)
    await clock.advance(by: .seconds(2))
    #expect(await executor.perform { await store.state.child.count } == 3)
    task.cancel()
    executor.drainUntilIdle()
    #expect(task.isFinished)
    #expect(store.liveEffectCount == 0)

    let casePathChild = store.scope(
      state: \.child,
      action: AnyCasePath(embed: Parent.Action.child, extract: { $0.child })
    )
    await executor.perform { await casePathChild.send(.increment) }
    #expect(await executor.perform { await store.state.child.count } == 4)
  }

  @Test func aScopedStoresFirstSendStartsEffectsItsTaskCancels() async {
    let executor = ManualExecutor()
    let clock = TestClock()
    let store = Store(
      initialState: Parent.State(),
      reducer: Parent(clock: clock),
      configuration: StoreConfiguration(executorPreference: executor)
    )
    defer { tearDown(store, on: executor) }
    let child = store.scope(state: \.child, action: { .child($0) })
    let task = await executor.perform { await child.send(.startTimer) }
    await clock.advance(by: .seconds(2))
    #expect(await executor.perform { await child.state.count } == 2)
    #expect(store.liveEffectCount == 1)
    task.cancel()
    executor.drainUntilIdle()
    #expect(task.isFinished)
    #expect(store.liveEffectCount == 0)
    await clock.advance(by: .seconds(2))
    #expect(await executor.perform { await store.state.child.count } == 2)
  }

  @Test func printChangesPrintsTheActionAndADiff() async {
    let printed = LockIsolated<[String]>([])
    let (stream, continuation) = AsyncStream<Void>.makeStream()
    let store = Store(initialState: Child.State()) {
      Child(clock: TestClock())._printChanges { entry in
        printed.withValue { $0.append(entry) }
        continuation.yield()
      }
    }
    await store.send(.increment)
    var iterator = stream.makeAsyncIterator()
    await iterator.next()
    #expect(
      printed.value == [
        """
        received action:
          .increment
            Child.State(
              id: 0,
          -   count: 0
          +   count: 1
            )
        """
      ]
    )
  }
}

@Suite(.timeLimit(.minutes(2))) struct IdentifiedArrayTests {
  private struct Item: Identifiable, Equatable, Hashable, Codable, Sendable {
    var id: Int
    var value: Int
  }

  @Test func randomOperationsKeepTheInvariantsOfAnArrayOfUniqueIDs() {
    var random = SystemRandomNumberGenerator()
    var array: IdentifiedArrayOf<Item> = []
    var model: [Item] = []
    for step in 0..<5_000 {
      let id = Int.random(in: 0..<50, using: &random)
      switch Int.random(in: 0..<7, using: &random) {
      case 0:
        let inserted = array.append(Item(id: id, value: step)).inserted
        #expect(inserted == !model.contains { $0.id == id })
        if inserted { model.append(Item(id: id, value: step)) }
      case 1:
        let index = Int.random(in: 0...model.count, using: &random)
        if array.insert(Item(id: id, value: step), at: index).inserted {
          model.insert(Item(id: id, value: step), at: index)
        }
      case 2:
        #expect(
          array.remove(id: id) == model.firstIndex { $0.id == id }.map { model.remove(at: $0) }
        )
      case 3:
        array[id: id]?.value = step
        if let index = model.firstIndex(where: { $0.id == id }) { model[index].value = step }
      case 4 where !model.isEmpty:
        let from = Int.random(in: 0..<model.count, using: &random)
        let to = Int.random(in: 0...model.count, using: &random)
        array.move(fromOffsets: [from], toOffset: to)
        let item = model.remove(at: from)
        model.insert(item, at: to > from ? to - 1 : to)
      case 5:
        array.sort { $0.value < $1.value }
        model.sort { $0.value < $1.value }
      default:
        array[id: id] = nil
        model.removeAll { $0.id == id }
      }
      #expect(array.elements == model)
      #expect(Set(array.ids).count == array.count)
    }
  }

  @Test func codableAndEquatable() throws {
    let array: IdentifiedArrayOf<Item> = [Item(id: 1, value: 1), Item(id: 2, value: 2)]
    #expect(array[id: 2]?.value == 2)
    #expect(array.index(id: 2) == 1)
    #expect(array == [Item(id: 1, value: 1), Item(id: 2, value: 2)])
    #expect(array != [Item(id: 2, value: 2), Item(id: 1, value: 1)])
    #expect(Set([array, array]).count == 1)
  }
}

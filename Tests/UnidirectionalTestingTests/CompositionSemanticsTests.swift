import Testing
import Unidirectional
import UnidirectionalTesting

/// A row with a timer that it starts and stops by a cancellation identifier of its own.
private struct Row: Reducer {
  struct State: Equatable, Sendable, Identifiable {
    var id: Int
    var ticks = 0
  }

  enum Action: Equatable, Sendable {
    case start
    case stop
    case tick
  }

  enum CancelID: Hashable, Sendable { case timer }

  let clock: TestClock

  func reduce(into state: inout State, action: Action) -> Effect<Action> {
    switch action {
    case .start:
      return .run { [clock] send in
        for await _ in clock.timer(interval: .seconds(1)) { await send(.tick) }
      }
      .cancellable(id: CancelID.timer)
    case .stop:
      return .cancel(id: CancelID.timer)
    case .tick:
      state.ticks += 1
      return .none
    }
  }
}

private struct Rows: Reducer {
  struct State: Equatable, Sendable {
    var rows: IdentifiedArrayOf<Row.State> = []
    var detail: Row.State?
  }

  enum Action: Equatable, Sendable {
    case rows(id: Int, action: Row.Action)
    case detail(Row.Action)
    case remove(Int)
    case replaceDetail(Int)
    case cancelParentTimer

    var rows: (id: Int, action: Row.Action)? {
      get { if case .rows(let id, let action) = self { (id, action) } else { nil } }
      set { if let newValue { self = .rows(id: newValue.id, action: newValue.action) } }
    }
    var detail: Row.Action? {
      get { if case .detail(let action) = self { action } else { nil } }
      set { if let newValue { self = .detail(newValue) } }
    }
  }

  let clock: TestClock

  var body: some ReducerOf<Self> {
    Reduce { state, action in
      switch action {
      case .remove(let id):
        state.rows[id: id] = nil
        return .none
      case .replaceDetail(let id):
        state.detail = Row.State(id: id)
        return .none
      case .cancelParentTimer:
        // The parent's identifier is not a row's: rows keep their timers.
        return .cancel(id: Row.CancelID.timer)
      case .rows, .detail:
        return .none
      }
    }
    .forEach(\.rows, action: \.rows) { Row(clock: self.clock) }
    .ifLet(\.detail, action: \.detail) { Row(clock: self.clock) }
  }
}

@Suite(.timeLimit(.minutes(2))) struct ChildCancellationScopeTests {
  @Test func twoRowsNeverCancelEachOthersTimers() async {
    let clock = TestClock()
    let store = TestStore(initialState: Rows.State(rows: [Row.State(id: 1), Row.State(id: 2)])) {
      Rows(clock: clock)
    }
    await store.send(.rows(id: 1, action: .start))
    await store.send(.rows(id: 2, action: .start))
    await store.send(.rows(id: 2, action: .stop))
    await clock.advance(by: .seconds(1))
    await store.receive(.rows(id: 1, action: .tick)) { $0.rows[id: 1]?.ticks = 1 }
    await store.send(.cancelParentTimer)
    await clock.advance(by: .seconds(1))
    await store.receive(.rows(id: 1, action: .tick)) { $0.rows[id: 1]?.ticks = 2 }
    // Removing the row cancels everything it started, whatever identifiers it used.
    await store.send(.remove(1)) { $0.rows[id: 1] = nil }
    await clock.advance(by: .seconds(5))
  }

  @Test func anIfLetChildsIdentifiersAreItsOwn() async {
    let clock = TestClock()
    let store = TestStore(
      initialState: Rows.State(rows: [Row.State(id: 1)], detail: Row.State(id: 9))
    ) {
      Rows(clock: clock)
    }
    await store.send(.rows(id: 1, action: .start))
    await store.send(.detail(.stop))  // the detail's `.timer` is not the row's
    await clock.advance(by: .seconds(1))
    await store.receive(.rows(id: 1, action: .tick)) { $0.rows[id: 1]?.ticks = 1 }
    await store.send(.remove(1)) { $0.rows = [] }
  }

  @Test func replacingAnIfLetChildWithAnotherIdentityCancelsTheOldOnesEffects() async {
    let clock = TestClock()
    let store = TestStore(initialState: Rows.State(detail: Row.State(id: 1))) {
      Rows(clock: clock)
    }
    await store.send(.detail(.start))
    await store.send(.replaceDetail(2)) { $0.detail = Row.State(id: 2) }
    // The first detail's timer is gone: nothing is applied to the second.
    await clock.advance(by: .seconds(3))
    #expect(clock.sleeperCount == 0)
  }

  @Test func replacingAnIfLetChildWithTheSameIdentityKeepsItsEffects() async {
    let clock = TestClock()
    let store = TestStore(initialState: Rows.State(detail: Row.State(id: 1))) {
      Rows(clock: clock)
    }
    let task = await store.send(.detail(.start))
    await store.send(.replaceDetail(1))
    await clock.advance(by: .seconds(1))
    await store.receive(.detail(.tick)) { $0.detail?.ticks = 1 }
    await task.cancel()
  }
}

private struct Session: Reducer {
  enum State: Equatable, Sendable {
    case loggedIn(Row.State)
    case loggedOut

    var loggedIn: Row.State? {
      get { if case .loggedIn(let row) = self { row } else { nil } }
      set { if let newValue { self = .loggedIn(newValue) } }
    }
  }

  enum Action: Equatable, Sendable {
    case loggedIn(Row.Action)
    case logOut

    var loggedIn: Row.Action? {
      get { if case .loggedIn(let action) = self { action } else { nil } }
      set { if let newValue { self = .loggedIn(newValue) } }
    }
  }

  let clock: TestClock
  var usesScope = false

  var body: some ReducerOf<Self> {
    if self.usesScope {
      Scope(state: \.loggedIn, action: \.loggedIn) { Row(clock: self.clock) }
      Reduce { state, action in
        if case .logOut = action { state = .loggedOut }
        return .none
      }
    } else {
      Reduce { state, action in
        if case .logOut = action { state = .loggedOut }
        return .none
      }
      .ifCaseLet(\.loggedIn, action: \.loggedIn) { Row(clock: self.clock) }
    }
  }
}

@Suite(.timeLimit(.minutes(2))) struct EnumStateTests {
  @Test func ifCaseLetRunsTheCaseAndCancelsItsEffectsWhenTheCaseChanges() async {
    let clock = TestClock()
    let store = TestStore(initialState: Session.State.loggedIn(Row.State(id: 1))) {
      Session(clock: clock)
    }
    await store.send(.loggedIn(.start))
    await clock.advance(by: .seconds(1))
    await store.receive(.loggedIn(.tick)) { $0 = .loggedIn(Row.State(id: 1, ticks: 1)) }
    await store.send(.logOut) { $0 = .loggedOut }
    #expect(clock.sleeperCount == 0)
  }

  @Test func anActionForAnotherCaseIsReported() async {
    let issues = await collectingIssues {
      let store = TestStore(initialState: Session.State.loggedOut) {
        Session(clock: TestClock())
      }
      await store.send(.loggedIn(.tick))
    }
    #expect(
      issues.map(\.message.firstLine) == [
        "An 'ifCaseLet' received a child action when the state was in another case."
      ]
    )
  }

  @Test func scopeRunsAnEnumCaseAndReportsActionsForOtherCases() async {
    let clock = TestClock()
    let store = TestStore(initialState: Session.State.loggedIn(Row.State(id: 1))) {
      Session(clock: clock, usesScope: true)
    }
    await store.send(.loggedIn(.tick)) { $0 = .loggedIn(Row.State(id: 1, ticks: 1)) }
    await store.send(.logOut) { $0 = .loggedOut }
    let issues = await collectingIssues {
      await store.send(.loggedIn(.tick))
    }
    #expect(
      issues.map(\.message.firstLine) == [
        "An 'Scope' received a child action when its state was 'nil' (or in another case)."
      ]
    )
  }
}

private struct Search: Reducer {
  struct State: Equatable, Sendable {
    var query = ""
    var changes: [String] = []
    var saved = 0
  }

  enum Action: Equatable, Sendable {
    case setQuery(String)
    case changed(String, String)
  }

  var body: some ReducerOf<Self> {
    Reduce { state, action in
      switch action {
      case .setQuery(let query):
        state.query = query
        return .none
      case .changed(let old, let new):
        state.changes.append("\(old)→\(new)")
        return .none
      }
    }
    .onChange(of: \.query) { old, new in
      .send(.changed(old, new))
    }
    .onChange(of: \.query) { _, _ in
      Reduce { state, _ in
        state.saved += 1
        return .none
      }
    }
  }
}

@Suite(.timeLimit(.minutes(2))) struct OnChangeTests {
  @Test func aChangeRunsTheEffectAndTheReducerOnlyWhenTheValueChanged() async {
    let store = TestStore(initialState: Search.State()) { Search() }
    await store.send(.setQuery("a")) {
      $0.query = "a"
      $0.saved = 1
    }
    await store.receive(.changed("", "a")) { $0.changes = ["→a"] }
    await store.send(.setQuery("a"))  // no change: nothing runs
  }
}

private struct Greeter: Sendable {
  var greet: @Sendable (String) -> String
}

private enum GreeterKey: DependencyKey {
  static let liveValue = Greeter { "hello \($0)" }
}

extension DependencyValues {
  fileprivate var greeter: Greeter {
    get { self[GreeterKey.self] }
    set { self[GreeterKey.self] = newValue }
  }
}

private struct Greeting: Reducer {
  enum Action: Equatable, Sendable {
    case greet(String)
    case greetLater(String)
  }

  @Dependency(\.greeter) var greeter

  func reduce(into state: inout [String], action: Action) -> Effect<Action> {
    switch action {
    case .greet(let name):
      state.append(self.greeter.greet(name))
      return .none
    case .greetLater(let name):
      return .run { send in
        @Dependency(\.greeter) var greeter
        await send(.greet(greeter.greet(name).uppercased()))
      }
    }
  }
}

@Suite(.timeLimit(.minutes(2))) struct ReducerDependencyTests {
  @Test func dependencyOverridesOneReducerAndItsEffects() async {
    let store = TestStore(initialState: [String]()) {
      Greeting().dependency(\.greeter, Greeter { "hi \($0)" })
    }
    await store.send(.greet("Blob")) { $0 = ["hi Blob"] }
    await store.send(.greetLater("Jr"))
    await store.receive(.greet("HI JR")) { $0.append("hi HI JR") }
  }

  @Test func transformDependencyChangesTheCurrentValue() async {
    let store = TestStore(initialState: [String]()) {
      Greeting()
        .transformDependency(\.greeter) { greeter in
          let base = greeter
          greeter = Greeter { base.greet($0) + "!" }
        }
    } withDependencies: {
      $0.greeter = Greeter { "hey \($0)" }
    }
    await store.send(.greet("Blob")) { $0 = ["hey Blob!"] }
  }
}

@Suite(.timeLimit(.minutes(2))) struct ReducerBuilderTests {
  private struct Append: Reducer {
    let text: String
    func reduce(into state: inout [String], action: Bool) -> Effect<Bool> {
      state.append(self.text)
      return .none
    }
  }

  @Test func combineReducersRunsEachInOrderAndKeepsEveryEffect() async {
    let store = TestStore(initialState: [String]()) {
      CombineReducers {
        Append(text: "a")
        Reduce<[String], Bool> { state, action in
          state.append("b")
          return action ? .send(false) : .none
        }
        Append(text: "c")
      }
    }
    await store.send(true) { $0 = ["a", "b", "c"] }
    await store.receive(false) { $0 += ["a", "b", "c"] }
  }

  @Test func anEmptyReducerChangesNothing() async {
    let store = TestStore(initialState: [String]()) { EmptyReducer<[String], Bool>() }
    await store.send(true)
  }

  @Test func builderIfElseAndForLoops() async {
    for flag in [true, false] {
      let store = TestStore(initialState: [String]()) {
        if flag {
          Append(text: "if")
        } else {
          Append(text: "else")
        }
        if flag {
          Append(text: "optional")
        }
        for index in 0..<2 {
          Append(text: "for \(index)")
        }
      }
      await store.send(true) {
        $0 = flag ? ["if", "optional", "for 0", "for 1"] : ["else", "for 0", "for 1"]
      }
    }
  }
}

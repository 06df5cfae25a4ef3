import Testing
import Unidirectional
import UnidirectionalTesting

/// The case-path forms of `Scope`, `ifLet`, `ifCaseLet` and `forEach`, for actions written without
/// key-path properties, and the builder's empty and availability forms.
@Suite(.timeLimit(.minutes(1))) struct CasePathCompositionTests {
  struct Row: Reducer {
    struct State: Equatable, Sendable, Identifiable {
      let id: Int
      var count = 0
    }
    enum Action: Equatable, Sendable { case tapped, bumped }
    func reduce(into state: inout State, action: Action) -> Effect<Action> {
      switch action {
      case .tapped:
        state.count += 1
        return .send(.bumped)
      case .bumped:
        state.count += 10
        return .none
      }
    }
  }

  struct Parent: Reducer {
    enum Mode: Equatable, Sendable { case editing(Row.State), viewing }

    struct State: Equatable, Sendable {
      var optional: Row.State?
      var mode = Mode.viewing
      var rows: IdentifiedArrayOf<Row.State> = []
      var editing: Row.State? {
        get { if case .editing(let row) = self.mode { row } else { nil } }
        set { if let newValue { self.mode = .editing(newValue) } }
      }
    }

    enum Action: Equatable, Sendable {
      case optional(Row.Action)
      case editing(Row.Action)
      case row(id: Int, action: Row.Action)
    }

    static let optional = AnyCasePath<Action, Row.Action>(
      embed: Action.optional,
      extract: { if case .optional(let action) = $0 { action } else { nil } }
    )
    static let editing = AnyCasePath<Action, Row.Action>(
      embed: Action.editing,
      extract: { if case .editing(let action) = $0 { action } else { nil } }
    )
    static let row = AnyCasePath<Action, (Int, Row.Action)>(
      embed: { Action.row(id: $0.0, action: $0.1) },
      extract: { if case .row(let id, let action) = $0 { (id, action) } else { nil } }
    )

    var body: some Reducer<State, Action> {
      EmptyReducer()
        .ifLet(\.optional, action: Self.optional) { Row() }
        .ifCaseLet(\.editing, action: Self.editing) { Row() }
        .forEach(\.rows, action: Self.row) { Row() }
    }
  }

  @Test func eachCasePathFormRunsTheChildAndEmbedsItsEffects() async {
    let store = TestStore(
      initialState: Parent.State(
        optional: Row.State(id: 0),
        mode: .editing(Row.State(id: 1)),
        rows: [Row.State(id: 2)]
      )
    ) { Parent() }
    await store.send(.optional(.tapped)) { $0.optional?.count = 1 }
    await store.receive(.optional(.bumped)) { $0.optional?.count = 11 }
    await store.send(.editing(.tapped)) { $0.mode = .editing(Row.State(id: 1, count: 1)) }
    await store.receive(.editing(.bumped)) { $0.mode = .editing(Row.State(id: 1, count: 11)) }
    await store.send(.row(id: 2, action: .tapped)) { $0.rows[id: 2]?.count = 1 }
    await store.receive(.row(id: 2, action: .bumped)) { $0.rows[id: 2]?.count = 11 }
  }

  @Test func scopeOntoOptionalStateWithACasePath() async {
    struct Host: Reducer {
      typealias State = Parent.State
      typealias Action = Parent.Action
      var body: some Reducer<State, Action> {
        Scope(state: \.optional, action: Parent.optional) { Row() }
      }
    }
    let store = TestStore(initialState: Parent.State(optional: Row.State(id: 0))) { Host() }
    await store.send(.optional(.tapped)) { $0.optional?.count = 1 }
    await store.receive(.optional(.bumped)) { $0.optional?.count = 11 }
  }

  @Test func anEmptyBuilderAndAvailabilityBlocksBuildReducers() async {
    struct Empty: Reducer {
      typealias State = Int
      typealias Action = Int
      var body: some Reducer<Int, Int> {}
    }
    struct Available: Reducer {
      typealias State = Int
      typealias Action = Int
      var body: some Reducer<Int, Int> {
        if #available(macOS 15, *) {
          Reduce { state, action in
            state += action
            return .none
          }
        }
      }
    }
    let empty = TestStore(initialState: 0) { Empty() }
    await empty.send(1)
    let available = TestStore(initialState: 0) { Available() }
    await available.send(2) { $0 = 2 }
  }
}

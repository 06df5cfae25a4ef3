import Testing
import Unidirectional

/// `store.scope(state:action:)` with an enum-property key path, across the shapes action enums
/// take: the first `send` must embed without a parent action to write into.
@Suite struct KeyPathScopeTests {
  fileprivate final class Token: Sendable {
    let onDeinit: @Sendable () -> Void
    init(onDeinit: @escaping @Sendable () -> Void) { self.onDeinit = onDeinit }
    deinit { self.onDeinit() }
  }

  fileprivate enum ChildAction: Sendable {
    case increment
    case add(Int)
    case named(String)
    case token(Token)
  }

  fileprivate struct State: Equatable, Sendable {
    var count = 0
    var log: [String] = []
  }

  /// Counts what its child path extracts; logs every other action so a wrong embedding shows.
  fileprivate static func reducer<Action: Sendable>(
    _ path: @escaping @Sendable (Action) -> ChildAction?
  ) -> Reduce<State, Action> {
    Reduce { state, action in
      switch path(action) {
      case .increment: state.count += 1
      case .add(let amount): state.count += amount
      case .named(let name): state.log.append(name)
      case .token: state.log.append("token")
      case nil: state.log.append("other \(action)")
      }
      return .none
    }
  }

  /// The seeds' generated style: the setter only writes into its own case.
  fileprivate enum Guarded: Sendable {
    case onAppear
    case count(Int)
    case child(ChildAction)
    case text(String)
    case done

    var child: ChildAction? {
      get { if case .child(let action) = self { action } else { nil } }
      set {
        guard case .child = self, let newValue else { return }
        self = .child(newValue)
      }
    }
  }

  @Test func theFirstSendEmbedsEvenWhenTheSetterOnlyWritesIntoItsOwnCase() async {
    let store = Store(initialState: State()) { Self.reducer(\Guarded.child) }
    let child = store.scope(state: \.self, action: \.child)
    await child.send(.increment)
    await child.send(.add(2))
    await child.send(.named("hello"))
    await store.send(.onAppear)
    await child.send(.increment)
    #expect(await store.state == State(count: 4, log: ["hello", "other onAppear"]))
  }

  /// The natural modern style: the setter replaces whatever case `self` is in.
  fileprivate enum Unguarded: Sendable {
    case child(ChildAction)
    case tap

    var child: ChildAction? {
      get { if case .child(let action) = self { action } else { nil } }
      set { if let newValue { self = .child(newValue) } }
    }
  }

  @Test func theFirstSendEmbedsWithAReplacingSetter() async {
    let store = Store(initialState: State()) { Self.reducer(\Unguarded.child) }
    let child = store.scope(state: \.self, action: \.child)
    await child.send(.add(5))
    #expect(await store.state.count == 5)
  }

  fileprivate enum Single: Sendable {
    case child(ChildAction)

    var child: ChildAction? {
      get { if case .child(let action) = self { action } else { nil } }
      set { if let newValue { self = .child(newValue) } }
    }
  }

  @Test func aSingleCaseEnum() async {
    let store = Store(initialState: State()) { Self.reducer(\Single.child) }
    await store.scope(state: \.self, action: \.child).send(.increment)
    #expect(await store.state.count == 1)
  }

  fileprivate enum Generic<Other: Sendable>: Sendable {
    case other(Other)
    case child(ChildAction)
    case idle

    var child: ChildAction? {
      get { if case .child(let action) = self { action } else { nil } }
      set { if let newValue { self = .child(newValue) } }
    }
  }

  @Test func aGenericActionEnum() async {
    let strings = Store(initialState: State()) { Self.reducer(\Generic<String>.child) }
    await strings.scope(state: \.self, action: \.child).send(.named("generic"))
    #expect(await strings.state.log == ["generic"])
    let tokens = Store(initialState: State()) { Self.reducer(\Generic<Token>.child) }
    await tokens.scope(state: \.self, action: \.child).send(.add(3))
    #expect(await tokens.state.count == 3)
  }

  /// Two cases carry the same payload type: the getter decides which one the key path means.
  fileprivate enum Twins: Sendable {
    case left(ChildAction)
    case right(ChildAction)

    var right: ChildAction? {
      get { if case .right(let action) = self { action } else { nil } }
      set { if let newValue { self = .right(newValue) } }
    }
    var left: ChildAction? {
      get { if case .left(let action) = self { action } else { nil } }
      set { if let newValue { self = .left(newValue) } }
    }
  }

  @Test func twoCasesWithTheSamePayloadResolveToTheOneTheGetterReads() async {
    let store = Store(initialState: State()) {
      Reduce<State, Twins> { state, action in
        switch action {
        case .left(.add(let amount)): state.count -= amount
        case .right(.add(let amount)): state.count += amount
        default: break
        }
        return .none
      }
    }
    await store.scope(state: \.self, action: \.right).send(.add(10))
    await store.scope(state: \.self, action: \.left).send(.add(1))
    #expect(await store.state.count == 9)
  }

  @Test func payloadsAreReleasedExactlyOnce() async {
    let released = Counter()
    do {
      let store = Store(initialState: State()) { Self.reducer(\Guarded.child) }
      let child = store.scope(state: \.self, action: \.child)
      for _ in 0..<3 {
        await child.send(.token(Token { released.increment() }))
      }
      #expect(await store.state.log == ["token", "token", "token"])
    }
    #expect(released.value == 3)
  }

  fileprivate struct GrandState: Equatable, Sendable {
    var middle = State()
  }

  fileprivate enum Middle: Sendable {
    case child(ChildAction)
    case reset

    var child: ChildAction? {
      get { if case .child(let action) = self { action } else { nil } }
      set {
        guard case .child = self, let newValue else { return }
        self = .child(newValue)
      }
    }
  }

  fileprivate enum Grand: Sendable {
    case start
    case middle(Middle)

    var middle: Middle? {
      get { if case .middle(let action) = self { action } else { nil } }
      set {
        guard case .middle = self, let newValue else { return }
        self = .middle(newValue)
      }
    }
  }

  @Test func nestedKeyPathScopesEmbedAtEveryLevel() async {
    let store = Store(initialState: GrandState()) {
      Scope(state: \GrandState.middle, action: \Grand.middle) {
        Self.reducer(\Middle.child)
      }
    }
    let grandchild = store
      .scope(state: \.middle, action: \.middle)
      .scope(state: \.self, action: \.child)
    await grandchild.send(.add(7))
    #expect(await store.state.middle.count == 7)
  }

  fileprivate enum Labelled: Sendable {
    case tap
    case child(action: ChildAction)

    var child: ChildAction? {
      get { if case .child(let action) = self { action } else { nil } }
      set {
        guard case .child = self, let newValue else { return }
        self = .child(action: newValue)
      }
    }
  }

  @Test func aLabelledPayload() async {
    let store = Store(initialState: State()) { Self.reducer(\Labelled.child) }
    await store.scope(state: \.self, action: \.child).send(.named("labelled"))
    #expect(await store.state.log == ["labelled"])
  }

  /// An action that is a struct, not an enum: only a template can carry the child action.
  fileprivate struct Envelope: Sendable {
    var child: ChildAction?
    var source = "root"
  }

  @Test func aStructActionUsesTheRootsFirstActionAsTemplate() async {
    let store = Store(initialState: State()) { Self.reducer(\Envelope.child) }
    let child = store.scope(state: \.self, action: \.child)
    let (_, issues) = await collectingIssues { await child.send(.increment) }
    #expect(issues.count == 1)
    await store.send(Envelope(child: nil, source: "first"))
    await child.send(.add(2))
    #expect(await store.state.count == 2)
    #expect(await store.state.log == ["other Envelope(child: nil, source: \"first\")"])
  }

  /// A one-case child action is zero-sized: its parent case is laid out with no payload
  /// storage, among (and after) the cases without payloads.
  fileprivate enum Tap: Sendable {
    case tapped
  }

  fileprivate enum WithZeroSizedChild: Sendable {
    case count(Int)
    case name(String)
    case idle
    case child(Tap)
    case ratio(Double)

    var child: Tap? {
      get { if case .child(let action) = self { action } else { nil } }
      set {
        guard case .child = self, let newValue else { return }
        self = .child(newValue)
      }
    }
  }

  fileprivate enum OnlyZeroSizedChild: Sendable {
    case child(Tap)
    case idle

    var child: Tap? {
      get { if case .child(let action) = self { action } else { nil } }
      set { if let newValue { self = .child(newValue) } }
    }
  }

  @Test func aZeroSizedChildActionsCaseIsBuiltByItsTagAlone() async {
    let counting = Reduce<State, WithZeroSizedChild> { state, action in
      if case .child(.tapped) = action { state.count += 1 } else { state.log.append("\(action)") }
      return .none
    }
    let store = Store(initialState: State()) { counting }
    let child = store.scope(state: \.self, action: \.child)
    await child.send(.tapped)
    await child.send(.tapped)
    #expect(await store.state == State(count: 2))

    let other = Store(initialState: State()) {
      Reduce<State, OnlyZeroSizedChild> { state, action in
        if case .child(.tapped) = action { state.count += 1 } else { state.log.append("\(action)") }
        return .none
      }
    }
    await other.scope(state: \.self, action: \.child).send(.tapped)
    #expect(await other.state == State(count: 1))
  }

  /// An `indirect` case cannot be built from metadata: the key path falls back to writing into
  /// an action the root reduced, and reports until there is one.
  fileprivate enum Indirect: Sendable {
    case tap
    indirect case child(ChildAction)

    var child: ChildAction? {
      get { if case .child(let action) = self { action } else { nil } }
      set { if let newValue { self = .child(newValue) } }
    }
  }

  @Test func withoutACaseToBuildTheFirstSendIsReportedThenATemplateIsUsed() async {
    let store = Store(initialState: State()) { Self.reducer(\Indirect.child) }
    let child = store.scope(state: \.self, action: \.child)
    let (_, issues) = await collectingIssues {
      await child.send(.increment)
    }
    #expect(issues.count == 1)
    #expect(
      issues.first?.message.hasPrefix(
        "A store scoped with a key path could not embed an action in its parent's action."
      ) == true
    )
    #expect(issues.first?.message.contains("Action: .increment") == true)
    #expect(await store.state.count == 0)

    await store.send(.tap)
    await child.send(.increment)
    #expect(await store.state == State(count: 1, log: ["other tap"]))
  }

  /// With a setter that only writes into its own case, a template in another case cannot carry
  /// the action: sending the untouched template would be a wrong action, so it is reported.
  fileprivate enum IndirectGuarded: Sendable {
    case tap
    indirect case child(ChildAction)

    var child: ChildAction? {
      get { if case .child(let action) = self { action } else { nil } }
      set {
        guard case .child = self, let newValue else { return }
        self = .child(newValue)
      }
    }
  }

  @Test func aTemplateTheSetterIgnoresIsReportedNotSent() async {
    let store = Store(initialState: State()) { Self.reducer(\IndirectGuarded.child) }
    await store.send(.tap)
    let (_, issues) = await collectingIssues {
      await store.scope(state: \.self, action: \.child).send(.increment)
    }
    #expect(issues.count == 1)
    #expect(await store.state == State(count: 0, log: ["other tap"]))
  }
}

private final class Counter: Sendable {
  private let storage = LockIsolated(0)
  var value: Int { self.storage.value }
  func increment() { self.storage.withValue { $0 += 1 } }
}

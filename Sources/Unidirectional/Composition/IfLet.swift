extension Reducer {
  /// Runs a child reducer on optional child state, before this reducer.
  ///
  /// ```swift
  /// var body: some Reducer<State, Action> {
  ///   Reduce { state, action in ... }   // presents or dismisses with `state.detail = ...`
  ///     .ifLet(\.detail, action: \.detail) { Detail() }
  /// }
  /// ```
  ///
  /// - A child action that arrives while the child state is `nil` is reported as an issue and
  ///   ignored by the child (the parent still sees it).
  /// - Setting the child state to `nil`, or replacing it with state of another identity (its
  ///   `Identifiable` id), cancels the child's effects.
  /// - Cancellation identifiers the child uses are scoped to it: they never reach effects of
  ///   the parent or of another child, as in the Composable Architecture.
  public func ifLet<WrappedState, WrappedAction: Sendable, Wrapped: Reducer>(
    _ state: WritableKeyPath<State, WrappedState?>,
    action: WritableKeyPath<Action, WrappedAction?>,
    @ReducerBuilder<WrappedState, WrappedAction> then wrapped: () -> Wrapped,
    fileID: StaticString = #fileID,
    filePath: StaticString = #filePath,
    line: UInt = #line,
    column: UInt = #column
  ) -> IfLetReducer<Self, Wrapped>
  where Wrapped.State == WrappedState, Wrapped.Action == WrappedAction {
    IfLetReducer(
      parent: self,
      child: wrapped(),
      state: state,
      action: ActionEmbedding(action),
      kind: .optional,
      location: SourceLocation(fileID: fileID, filePath: filePath, line: line, column: column)
    )
  }

  /// `ifLet(_:action:then:)` with a case path (``AnyCasePath``) for the action.
  public func ifLet<WrappedState, WrappedAction: Sendable, Wrapped: Reducer>(
    _ state: WritableKeyPath<State, WrappedState?>,
    action: AnyCasePath<Action, WrappedAction>,
    @ReducerBuilder<WrappedState, WrappedAction> then wrapped: () -> Wrapped,
    fileID: StaticString = #fileID,
    filePath: StaticString = #filePath,
    line: UInt = #line,
    column: UInt = #column
  ) -> IfLetReducer<Self, Wrapped>
  where Wrapped.State == WrappedState, Wrapped.Action == WrappedAction {
    IfLetReducer(
      parent: self,
      child: wrapped(),
      state: state,
      action: ActionEmbedding(action),
      kind: .optional,
      location: SourceLocation(fileID: fileID, filePath: filePath, line: line, column: column)
    )
  }

  /// Runs a child reducer on one case of enum state, before this reducer.
  ///
  /// The state path is an optional property of the enum (`var loggedIn: LoggedIn.State?`,
  /// reading the case's payload and writing it back into the same case):
  ///
  /// ```swift
  /// enum State { case loggedIn(LoggedIn.State), loggedOut(LoggedOut.State) }
  ///
  /// var body: some Reducer<State, Action> {
  ///   Reduce { state, action in ... }   // switches cases: state = .loggedOut(...)
  ///     .ifCaseLet(\.loggedIn, action: \.loggedIn) { LoggedIn() }
  ///     .ifCaseLet(\.loggedOut, action: \.loggedOut) { LoggedOut() }
  /// }
  /// ```
  ///
  /// - A child action that arrives while the state is in another case is reported and ignored
  ///   by the child.
  /// - When the state leaves the case (or the case's payload changes identity), the child's
  ///   effects are cancelled.
  public func ifCaseLet<CaseState, CaseAction: Sendable, Case: Reducer>(
    _ state: WritableKeyPath<State, CaseState?>,
    action: WritableKeyPath<Action, CaseAction?>,
    @ReducerBuilder<CaseState, CaseAction> then wrapped: () -> Case,
    fileID: StaticString = #fileID,
    filePath: StaticString = #filePath,
    line: UInt = #line,
    column: UInt = #column
  ) -> IfLetReducer<Self, Case>
  where Case.State == CaseState, Case.Action == CaseAction {
    IfLetReducer(
      parent: self,
      child: wrapped(),
      state: state,
      action: ActionEmbedding(action),
      kind: .enumCase,
      location: SourceLocation(fileID: fileID, filePath: filePath, line: line, column: column)
    )
  }

  /// `ifCaseLet(_:action:then:)` with a case path (``AnyCasePath``) for the action.
  public func ifCaseLet<CaseState, CaseAction: Sendable, Case: Reducer>(
    _ state: WritableKeyPath<State, CaseState?>,
    action: AnyCasePath<Action, CaseAction>,
    @ReducerBuilder<CaseState, CaseAction> then wrapped: () -> Case,
    fileID: StaticString = #fileID,
    filePath: StaticString = #filePath,
    line: UInt = #line,
    column: UInt = #column
  ) -> IfLetReducer<Self, Case>
  where Case.State == CaseState, Case.Action == CaseAction {
    IfLetReducer(
      parent: self,
      child: wrapped(),
      state: state,
      action: ActionEmbedding(action),
      kind: .enumCase,
      location: SourceLocation(fileID: fileID, filePath: filePath, line: line, column: column)
    )
  }
}

/// The reducer `ifLet(_:action:then:)` and `ifCaseLet(_:action:then:)` return.
public struct IfLetReducer<Parent: Reducer, Child: Reducer>: Reducer {
  let parent: Parent
  let child: Child
  let state: WritableKeyPath<Parent.State, Child.State?>
  let action: ActionEmbedding<Parent.Action, Child.Action>
  let kind: OptionalChildKind
  let location: SourceLocation

  init(
    parent: Parent,
    child: Child,
    state: WritableKeyPath<Parent.State, Child.State?>,
    action: ActionEmbedding<Parent.Action, Child.Action>,
    kind: OptionalChildKind,
    location: SourceLocation
  ) {
    self.parent = parent
    self.child = child
    self.state = state
    self.action = action
    self.kind = kind
    self.location = location
  }

  /// Runs the child (if present), then the parent; cancels the child's effects when the parent
  /// dismissed it or replaced it with another identity.
  public func reduce(into state: inout Parent.State, action: Parent.Action) -> Effect<Parent.Action>
  {
    let path = KeyPathID(self.state)
    let before = state[keyPath: self.state].map { ChildCancelID(path: path, state: $0) }
    var childEffect = Effect<Parent.Action>.none
    if let childAction = self.action.extract(action) {
      childEffect = runOptionalChild(
        self.child,
        in: &state[keyPath: self.state],
        id: before,
        action: childAction,
        parentAction: action,
        embedding: self.action,
        kind: self.kind,
        location: self.location
      )
    }
    let parentEffect = self.parent.reduce(into: &state, action: action)
    guard let before else { return .merge(childEffect, parentEffect) }
    let after = state[keyPath: self.state].map { ChildCancelID(path: path, state: $0) }
    guard after != before else { return .merge(childEffect, parentEffect) }
    return .merge(childEffect, parentEffect, .cancel(id: before))
  }
}

/// Which kind of optional child a reducer runs, for its reports.
enum OptionalChildKind: Sendable {
  case optional
  case enumCase
  case scope

  var operatorName: String {
    switch self {
    case .optional: "ifLet"
    case .enumCase: "ifCaseLet"
    case .scope: "Scope"
    }
  }
}

/// Runs a child reducer on optional state, with its cancellation identifiers scoped to it and
/// its effects cancellable as a whole by `id`; reports (and skips) an action for absent state.
func runOptionalChild<Child: Reducer, ParentAction: Sendable>(
  _ child: Child,
  in state: inout Child.State?,
  id: ChildCancelID?,
  action childAction: Child.Action,
  parentAction: ParentAction,
  embedding: ActionEmbedding<ParentAction, Child.Action>,
  kind: OptionalChildKind,
  location: SourceLocation
) -> Effect<ParentAction> {
  guard let id, state != nil else {
    let condition =
      kind == .enumCase
      ? "the state was in another case"
      : kind == .scope ? "its state was 'nil' (or in another case)" : "the child state was 'nil'"
    location.report(
      """
      An '\(kind.operatorName)' received a child action when \(condition).

        Action: \(debugDescription(of: childAction))

      The child reducer did not run. This usually means the action was sent after the child \
      state was dismissed: make sure the child's effects are cancelled, and that nothing sends \
      child actions to a dismissed child.
      """
    )
    return .none
  }
  let effect = withCancelScope(CancelKey(id)) {
    // swift-format-ignore: NeverForceUnwrap
    child.reduce(into: &state!, action: childAction)
  }
  return embedding.embed(effect, template: parentAction).cancellable(id: id)
}

/// The cancellation identifier of an optional child's effects: its state path and, when the
/// state is `Identifiable`, its id (so replacing it with another identity cancels them).
struct ChildCancelID: Hashable, Sendable {
  let path: KeyPathID
  let identity: CancelKey?

  init(path: KeyPathID, state: Any) {
    self.path = path
    self.identity = identityOf(state).map(CancelKey.init(identity:))
  }
}

/// The cancellation identifier of a `forEach` element's effects.
struct ElementCancelID<ID: Hashable & Sendable>: Hashable, Sendable {
  let path: KeyPathID
  let id: ID
}

/// The `Identifiable` id of a value, if it has one.
func identityOf(_ value: Any) -> AnyHashable? {
  func id<Value: Identifiable>(_ value: Value) -> AnyHashable { AnyHashable(value.id) }
  guard let identifiable = value as? any Identifiable else { return nil }
  return id(identifiable)
}

/// A key path as part of a cancellation id (equal key paths name the same child).
///
/// Safety: key paths are immutable values (see ``SendableKeyPath``); this one is only hashed
/// and compared.
struct KeyPathID: Hashable, @unchecked Sendable {
  let keyPath: AnyKeyPath

  init(_ keyPath: AnyKeyPath) {
    self.keyPath = keyPath
  }
}

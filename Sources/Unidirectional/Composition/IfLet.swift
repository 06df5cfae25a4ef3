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
  @inlinable
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
  @inlinable
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
  @inlinable
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
  @inlinable
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
  @usableFromInline let parent: Parent
  @usableFromInline let child: Child
  @usableFromInline let state: WritableKeyPath<Parent.State, Child.State?>
  @usableFromInline let action: ActionEmbedding<Parent.Action, Child.Action>
  @usableFromInline let kind: OptionalChildKind
  @usableFromInline let location: SourceLocation

  @usableFromInline
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

  // NB: every parent action passes here. Inlinable, so it is specialized for the feature; and
  // the common path (the child stays, or stays absent) compares identities without making
  // cancellation ids. Unspecialized, making two ids (each boxing the child state into `Any` to
  // cast it, and its identity into a key) and merging through an array, with the metadata
  // lookups of generic code throughout, a parent action cost 29 sends.

  /// Runs the child (if present), then the parent; cancels the child's effects when the parent
  /// dismissed it or replaced it with another identity.
  @inlinable
  public func reduce(into state: inout Parent.State, action: Parent.Action) -> Effect<Parent.Action>
  {
    let before = state[keyPath: self.state].map(ChildIdentity.init)
    var childEffect = Effect<Parent.Action>.none
    if let childAction = self.action.extract(action) {
      childEffect = runOptionalChild(
        self.child,
        in: &state[keyPath: self.state],
        id: before.map { ChildCancelID(path: KeyPathID(self.state), identity: $0) },
        action: childAction,
        parentAction: action,
        embedding: self.action,
        kind: self.kind,
        location: self.location
      )
    }
    let parentEffect = self.parent.reduce(into: &state, action: action)
    guard let before else { return childEffect.merge(with: parentEffect) }
    let after = state[keyPath: self.state].map(ChildIdentity.init)
    guard after != before else { return childEffect.merge(with: parentEffect) }
    return .merge(
      childEffect,
      parentEffect,
      .cancel(id: ChildCancelID(path: KeyPathID(self.state), identity: before))
    )
  }
}

/// Which kind of optional child a reducer runs, for its reports.
@usableFromInline
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
@usableFromInline
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
@usableFromInline
struct ChildCancelID: Hashable, Sendable {
  let path: KeyPathID
  let identity: CancelKey?

  @usableFromInline
  init(path: KeyPathID, identity: ChildIdentity) {
    self.path = path
    self.identity = identity.hashable.map(CancelKey.init(identity:))
  }

  init<State>(path: KeyPathID, state: State) {
    self.init(path: path, identity: ChildIdentity(state))
  }
}

/// A present child state's identity: its `Identifiable` id, or none (any state is the same
/// child).
///
/// NB: not an `AnyHashable`: making one looks for a custom representation with a dynamic cast,
/// and comparing two instantiates the box's generic type; with an integer id, the standard
/// library's integer boxes cast again. Those were two thirds of a parent action's cost.
@usableFromInline
struct ChildIdentity: Equatable {
  @usableFromInline let id: (any ChildIdentityValue)?

  @inlinable
  init<State>(_ state: State) {
    guard let identifiable = State.self as? any Identifiable.Type else {
      self.id = nil
      return
    }
    // NB: the opened type is `State` itself, so the state is read as it, in place.
    func id<I: Identifiable>(_: I.Type) -> any ChildIdentityValue {
      withUnsafePointer(to: state) {
        TypedChildIdentity(id: UnsafeRawPointer($0).assumingMemoryBound(to: I.self).pointee.id)
      }
    }
    self.id = id(identifiable)
  }

  @inlinable
  static func == (lhs: Self, rhs: Self) -> Bool {
    switch (lhs.id, rhs.id) {
    case (nil, nil): return true
    case (let left?, let right?): return left.isEqual(to: right)
    default: return false
    }
  }

  /// The id as a cancellation key's identity.
  var hashable: AnyHashable? {
    self.id?.hashable
  }
}

/// An `Identifiable` id, compared without a dynamic cast.
@usableFromInline
protocol ChildIdentityValue {
  func isEqual(to other: any ChildIdentityValue) -> Bool
  var hashable: AnyHashable { get }
}

@usableFromInline
struct TypedChildIdentity<ID: Hashable>: ChildIdentityValue {
  @usableFromInline let id: ID

  @inlinable
  init(id: ID) {
    self.id = id
  }

  @inlinable
  func isEqual(to other: any ChildIdentityValue) -> Bool {
    func equal<Other: ChildIdentityValue>(_ other: Other) -> Bool {
      // NB: equal metatypes: `Other` is `Self`.
      guard Other.self == Self.self else { return false }
      return unsafeBitCast(other, to: Self.self).id == self.id
    }
    return equal(other)
  }

  @usableFromInline var hashable: AnyHashable {
    AnyHashable(self.id)
  }
}

/// The cancellation identifier of a `forEach` element's effects.
@usableFromInline
struct ElementCancelID<ID: Hashable & Sendable>: Hashable, Sendable {
  let path: KeyPathID
  let id: ID

  @usableFromInline
  init(path: KeyPathID, id: ID) {
    self.path = path
    self.id = id
  }
}

/// A key path as part of a cancellation id (equal key paths name the same child): only hashed
/// and compared.
@usableFromInline typealias KeyPathID = Immutable<AnyKeyPath>

/// Runs a child reducer on part of the parent's state, for the parent actions that carry a
/// child action.
///
/// ```swift
/// var body: some Reducer<State, Action> {
///   Scope(state: \.counter, action: \.counter) {
///     Counter()
///   }
///   Reduce { state, action in ... }   // the parent's own logic, after the child's
/// }
/// ```
///
/// The action path is an optional property of the parent action, the "pullback" shape:
///
/// ```swift
/// enum Action {
///   case counter(Counter.Action)
///   var counter: Counter.Action? {
///     get { if case .counter(let action) = self { action } else { nil } }
///     set { if let newValue { self = .counter(newValue) } }
///   }
/// }
/// ```
///
/// The child's effects are mapped back into parent actions; all of them are kept.
///
/// The state path may also be optional, such as an enum case's property
/// (`Scope(state: \.loggedIn, action: \.loggedIn) { LoggedIn() }`): the child then runs only
/// while the state is in that case, and an action for it in another case is reported. Unlike
/// `ifCaseLet(_:action:then:)`, `Scope` does not see the
/// parent's later changes, so it does not cancel the child's effects when the case changes:
/// use `ifCaseLet` for that (the Composable Architecture draws the same line).
public struct Scope<ParentState, ParentAction: Sendable, Child: Reducer>: Reducer {
  @usableFromInline let state: WritableKeyPath<ParentState, Child.State>
  /// For optional state: its path, and where the scope was made (for reports).
  @usableFromInline let optionalState: OptionalScopeState<ParentState, Child.State>?
  @usableFromInline let action: ActionEmbedding<ParentAction, Child.Action>
  @usableFromInline let child: Child

  /// Scopes with an optional action property of the parent action.
  @inlinable @inline(__always)
  public init<ChildState, ChildAction>(
    state: WritableKeyPath<ParentState, ChildState>,
    action: WritableKeyPath<ParentAction, ChildAction?>,
    @ReducerBuilder<ChildState, ChildAction> child: () -> Child
  ) where ChildState == Child.State, ChildAction == Child.Action {
    self.state = state
    self.optionalState = nil
    self.action = ActionEmbedding(action)
    self.child = child()
  }

  /// Scopes onto optional state, such as an enum case, with an optional action property.
  ///
  /// NB: disfavored: a key path to non-optional state also converts to an optional one, and the
  /// plain scope must win then.
  @_disfavoredOverload
  public init<ChildState, ChildAction>(
    state: WritableKeyPath<ParentState, ChildState?>,
    action: WritableKeyPath<ParentAction, ChildAction?>,
    @ReducerBuilder<ChildState, ChildAction> child: () -> Child,
    fileID: StaticString = #fileID,
    filePath: StaticString = #filePath,
    line: UInt = #line,
    column: UInt = #column
  ) where ChildState == Child.State, ChildAction == Child.Action {
    // NB: `state` is never read for optional state; the force-unwrapping path only fills it.
    let unwrapped: WritableKeyPath<ChildState?, ChildState> = \.self!
    self.state = state.appending(path: unwrapped)
    self.optionalState = OptionalScopeState(
      path: state,
      location: SourceLocation(fileID: fileID, filePath: filePath, line: line, column: column)
    )
    self.action = ActionEmbedding(action)
    self.child = child()
  }

  /// Scopes onto optional state, such as an enum case, with a case path for the action.
  @_disfavoredOverload
  public init<ChildState, ChildAction>(
    state: WritableKeyPath<ParentState, ChildState?>,
    action: AnyCasePath<ParentAction, ChildAction>,
    @ReducerBuilder<ChildState, ChildAction> child: () -> Child,
    fileID: StaticString = #fileID,
    filePath: StaticString = #filePath,
    line: UInt = #line,
    column: UInt = #column
  ) where ChildState == Child.State, ChildAction == Child.Action {
    // NB: `state` is never read for optional state; the force-unwrapping path only fills it.
    let unwrapped: WritableKeyPath<ChildState?, ChildState> = \.self!
    self.state = state.appending(path: unwrapped)
    self.optionalState = OptionalScopeState(
      path: state,
      location: SourceLocation(fileID: fileID, filePath: filePath, line: line, column: column)
    )
    self.action = ActionEmbedding(action)
    self.child = child()
  }

  /// Scopes with a case path built from `embed` and `extract` closures.
  @inlinable
  public init<ChildState, ChildAction>(
    state: WritableKeyPath<ParentState, ChildState>,
    action: AnyCasePath<ParentAction, ChildAction>,
    @ReducerBuilder<ChildState, ChildAction> child: () -> Child
  ) where ChildState == Child.State, ChildAction == Child.Action {
    self.state = state
    self.optionalState = nil
    self.action = ActionEmbedding(action)
    self.child = child()
  }

  /// Runs the child reducer on the child state when the action carries a child action.
  @inlinable @inline(__always)
  public func reduce(into state: inout ParentState, action: ParentAction) -> Effect<ParentAction> {
    guard let childAction = self.action.extract(action) else { return .none }
    if let optional = self.optionalState {
      return self.reduceOptional(&state, optional, childAction, action)
    }
    let effect = self.child.reduce(into: &state[keyPath: self.state], action: childAction)
    return self.action.embed(effect, template: action)
  }

  @usableFromInline
  func reduceOptional(
    _ state: inout ParentState,
    _ optional: OptionalScopeState<ParentState, Child.State>,
    _ childAction: Child.Action,
    _ action: ParentAction
  ) -> Effect<ParentAction> {
    let path = optional.path
    let location = optional.location
    let id = state[keyPath: path].map { ChildCancelID(path: KeyPathID(path), state: $0) }
    return runOptionalChild(
      self.child,
      in: &state[keyPath: path],
      id: id,
      action: childAction,
      parentAction: action,
      embedding: self.action,
      kind: .scope,
      location: location
    )
  }
}

/// Where a ``Scope`` onto optional state finds it (a class, so a plain scope carries one empty
/// reference: a larger stored property stopped the optimizer from folding scopes' key paths).
@usableFromInline final class OptionalScopeState<Parent, Child> {
  let path: WritableKeyPath<Parent, Child?>
  let location: SourceLocation

  init(path: WritableKeyPath<Parent, Child?>, location: SourceLocation) {
    self.path = path
    self.location = location
  }
}

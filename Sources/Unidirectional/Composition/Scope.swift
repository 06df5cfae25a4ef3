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
public struct Scope<ParentState, ParentAction: Sendable, Child: Reducer>: Reducer {
  @usableFromInline let state: WritableKeyPath<ParentState, Child.State>
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
    self.action = ActionEmbedding(action)
    self.child = child()
  }

  @inlinable @inline(__always)
  public func reduce(into state: inout ParentState, action: ParentAction) -> Effect<ParentAction> {
    guard let childAction = self.action.extract(action) else { return .none }
    let effect = self.child.reduce(into: &state[keyPath: self.state], action: childAction)
    return self.action.embed(effect, template: action)
  }
}

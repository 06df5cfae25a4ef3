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
  /// - Setting the child state to `nil` cancels the child's effects.
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
      location: SourceLocation(fileID: fileID, filePath: filePath, line: line, column: column)
    )
  }

  /// ``ifLet(_:action:then:fileID:filePath:line:column:)`` with a case path for the action.
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
      location: SourceLocation(fileID: fileID, filePath: filePath, line: line, column: column)
    )
  }
}

/// The reducer ``Reducer/ifLet(_:action:then:fileID:filePath:line:column:)`` returns.
public struct IfLetReducer<Parent: Reducer, Child: Reducer>: Reducer {
  let parent: Parent
  let child: Child
  let state: WritableKeyPath<Parent.State, Child.State?>
  let action: ActionEmbedding<Parent.Action, Child.Action>
  let location: SourceLocation

  public func reduce(into state: inout Parent.State, action: Parent.Action) -> Effect<Parent.Action> {
    let id = ChildCancelID(path: KeyPathID(self.state))
    var childEffect = Effect<Parent.Action>.none
    if let childAction = self.action.extract(action) {
      if state[keyPath: self.state] != nil {
        let effect = self.child.reduce(into: &state[keyPath: self.state]!, action: childAction)
        childEffect = self.action.embed(effect, template: action).cancellable(id: id)
      } else {
        self.location.report(
          """
          An 'ifLet' received a child action when the child state was 'nil'.

            Action: \(debugDescription(of: childAction))

          The child reducer did not run. This usually means the action was sent after the \
          child state was dismissed: make sure the child's effects are cancelled, and that \
          nothing sends child actions to a dismissed child.
          """
        )
      }
    }
    let wasPresent = state[keyPath: self.state] != nil
    let parentEffect = self.parent.reduce(into: &state, action: action)
    if wasPresent && state[keyPath: self.state] == nil {
      return .merge(childEffect, parentEffect, .cancel(id: id))
    }
    return .merge(childEffect, parentEffect)
  }
}

/// The cancellation id of a child's effects: its state path, and for `forEach` its element id.
struct ChildCancelID: Hashable, Sendable {
  let path: KeyPathID
}

struct ElementCancelID<ID: Hashable & Sendable>: Hashable, Sendable {
  let path: KeyPathID
  let id: ID
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


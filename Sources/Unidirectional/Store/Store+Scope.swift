extension Store {
  /// A store for part of this store's state and actions, sharing its isolation and effects.
  ///
  /// ```swift
  /// let counter = store.scope(state: \.counter, action: AppAction.counter)
  /// await counter.send(.incrementTapped)     // sends .counter(.incrementTapped) to `store`
  /// ```
  ///
  /// The child runs on its root's executor (no extra hop). Its `send` sends the embedded action
  /// to the root and returns the root's ``StoreTask`` for it; its effects, cancellation and
  /// shutdown are the root's.
  ///
  /// The action is an embedding function, usually the enum case (`AppAction.counter`, or
  /// `{ .counter($0) }`), or an ``AnyCasePath``. A writable key path on the action cannot be
  /// used here: its setter needs a parent action to write into, and a scoped store's `send` has
  /// none.
  ///
  /// - Parameters:
  ///   - state: The child state's path in this store's state.
  ///   - embed: Embeds child actions into this store's actions.
  /// - Returns: The scoped store.
  @inlinable
  public nonisolated func scope<ChildState: Sendable, ChildAction: Sendable>(
    state: WritableKeyPath<State, ChildState>,
    action embed: @escaping @Sendable (ChildAction) -> Action
  ) -> Store<ChildState, ChildAction> {
    self.scope(state: state, embed: embed)
  }

  /// A scoped store whose actions are embedded by a case path.
  ///
  /// - Parameters:
  ///   - state: The child state's path in this store's state.
  ///   - action: Embeds child actions into this store's actions.
  /// - Returns: The scoped store.
  @inlinable
  public nonisolated func scope<ChildState: Sendable, ChildAction: Sendable>(
    state: WritableKeyPath<State, ChildState>,
    action: AnyCasePath<Action, ChildAction>
  ) -> Store<ChildState, ChildAction> {
    self.scope(state: state, embed: { action.embed($0) })
  }

  @inlinable
  nonisolated func scope<ChildState: Sendable, ChildAction: Sendable>(
    state: WritableKeyPath<State, ChildState>,
    embed: @escaping @Sendable (ChildAction) -> Action
  ) -> Store<ChildState, ChildAction> {
    if let root = self.root {
      // The common case, scoping a root store: the scoped core's send path is formed here,
      // specialized for these types in the caller's module.
      // Safety: the scoped core shares the root core, which is only used on the executor the
      // new store shares with this one; handing it over races with nothing.
      nonisolated(unsafe) let scoped: any StoreCore<ChildState, ChildAction> = ScopedCore(
        root: root,
        state: state,
        embed: embed,
        sendAction: { core, action, location in core.sendNow(action, location: location) }
      )
      return Store<ChildState, ChildAction>(core: scoped, executor: self.executor)
    }
    // Safety: as above.
    nonisolated(unsafe) let scoped = self.core.scoped(state: state, embed: embed)
    return Store<ChildState, ChildAction>(core: scoped, executor: self.executor)
  }
}

extension Store {
  /// A store for part of this store's state and actions, sharing its isolation and effects.
  ///
  /// ```swift
  /// let counter = store.scope(state: \.counter, action: \.counter)
  /// await counter.send(.incrementTapped)     // sends .counter(.incrementTapped) to `store`
  /// ```
  ///
  /// The child runs on its root's executor (no extra hop). Its `send` sends the embedded action
  /// to the root and returns the root's ``StoreTask`` for it; its effects, cancellation and
  /// shutdown are the root's.
  ///
  /// > Note: A key path can only embed a child action by writing it into an existing parent
  /// > action, so the first `send` to a key-path-scoped store uses the last action the root
  /// > reduced as that template. Until the root has reduced one, sending to the child reports
  /// > an issue; scope with an `AnyCasePath` or an embedding function (`action: Action.child`)
  /// > to send first.
  public nonisolated func scope<ChildState: Sendable, ChildAction: Sendable>(
    state: WritableKeyPath<State, ChildState>,
    action: WritableKeyPath<Action, ChildAction?>
  ) -> Store<ChildState, ChildAction> {
    let path = SendableKeyPath(action)
    return self.scope(state: state) { child, template in
      guard var parent = template else { return nil }
      parent[keyPath: path.value] = child
      return parent
    }
  }

  /// A scoped store whose actions are embedded by a case path.
  public nonisolated func scope<ChildState: Sendable, ChildAction: Sendable>(
    state: WritableKeyPath<State, ChildState>,
    action: AnyCasePath<Action, ChildAction>
  ) -> Store<ChildState, ChildAction> {
    self.scope(state: state) { child, _ in action.embed(child) }
  }

  /// A scoped store whose actions are embedded by a function, such as an enum case:
  /// `store.scope(state: \.counter, action: AppAction.counter)`.
  public nonisolated func scope<ChildState: Sendable, ChildAction: Sendable>(
    state: WritableKeyPath<State, ChildState>,
    action embed: @escaping @Sendable (ChildAction) -> Action
  ) -> Store<ChildState, ChildAction> {
    self.scope(state: state) { child, _ in embed(child) }
  }

  private nonisolated func scope<ChildState: Sendable, ChildAction: Sendable>(
    state: WritableKeyPath<State, ChildState>,
    embed: @escaping @Sendable (ChildAction, Action?) -> Action?
  ) -> Store<ChildState, ChildAction> {
    Store<ChildState, ChildAction>(
      anchor: self.anchor,
      core: ScopedCore(parent: self, state: SendableKeyPath(state), embed: embed)
    )
  }
}

/// The core of a scoped store: reads through its parent's state and sends to its parent.
///
/// It runs on the root's executor (scoped stores share it), so it may use the parent store's
/// isolated members synchronously with `assumeIsolated`.
final class ScopedCore<ParentState: Sendable, ParentAction: Sendable, State: Sendable, Action: Sendable>:
  StoreCore<State, Action>
{
  private let parent: Store<ParentState, ParentAction>
  private let statePath: SendableKeyPath<ParentState, State>
  private let embed: @Sendable (Action, ParentAction?) -> ParentAction?

  init(
    parent: Store<ParentState, ParentAction>,
    state: SendableKeyPath<ParentState, State>,
    embed: @escaping @Sendable (Action, ParentAction?) -> ParentAction?
  ) {
    self.parent = parent
    self.statePath = state
    self.embed = embed
    super.init(runtime: parent.runtime)
  }

  override var state: State {
    let path = self.statePath
    return self.parent.assumeIsolated { $0.core.state[keyPath: path.value] }
  }

  override var isShutDown: Bool {
    self.parent.assumeIsolated { $0.core.isShutDown }
  }

  override func send(_ action: Action, location: SourceLocation) -> StoreTask {
    let embed = self.embed
    return self.parent.assumeIsolated { parent in
      guard let parentAction = embed(action, parent.core.lastAction) else {
        location.report(
          """
          A store scoped with a key path was sent an action before its root reduced one.

            Action: \(debugDescription(of: action))

          A key path embeds a child action by writing it into a parent action, and there is \
          none yet. Scope with an embedding function instead: \
          'store.scope(state: \\.child, action: ParentAction.child)'.
          """
        )
        return StoreTask(nil)
      }
      return parent.sendEmbedded(parentAction, location: location)
    }
  }

  override func receive(_ action: Action, from box: EffectBox) {
    // NB: effects always deliver to the root store, which owns the runtime.
  }

  override func shutdown() async {
    await self.parent.shutdown()
  }

  override func shutdown(gracePeriod: Duration, clock: (any Clock<Duration>)?) async {
    await self.parent.shutdown(gracePeriod: gracePeriod, clock: clock)
  }

  override func subscribeToStates() -> StateSubscription<State>? {
    let path = self.statePath
    return self.parent.assumeIsolated { parent in
      guard let base = parent.core.subscribeToStates() else { return nil }
      return MappedSubscription(base: base) { $0[keyPath: path.value] }
    }
  }
}

extension Store {
  /// Sends an action that a scoped store embedded (already on this store's executor).
  func sendEmbedded(_ action: Action, location: SourceLocation) -> StoreTask {
    self.send(
      action,
      fileID: location.fileID,
      filePath: location.filePath,
      line: location.line,
      column: location.column
    )
  }
}

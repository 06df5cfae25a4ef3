extension Store {
  /// A store for part of this store's state and actions, sharing its isolation and effects.
  ///
  /// ```swift
  /// let counter = store.scope(state: \.counter, action: { .counter($0) })
  /// await counter.send(.incrementTapped)     // sends .counter(.incrementTapped) to `store`
  /// ```
  ///
  /// The child runs on its root's executor (no extra hop). Its `send` sends the embedded action
  /// to the root and returns the root's ``StoreTask`` for it; its effects, cancellation and
  /// shutdown are the root's.
  ///
  /// The action is an embedding function, usually the enum case (`action: AppAction.counter`),
  /// or an ``AnyCasePath``. A writable key path on the action cannot be used here: its setter
  /// needs a parent action to write into, and a scoped store's `send` has none.
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

  /// A scoped store whose actions are embedded by a function, such as an enum case:
  /// `store.scope(state: \.counter, action: AppAction.counter)`.
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

  @inlinable
  nonisolated func scope<ChildState: Sendable, ChildAction: Sendable>(
    state: WritableKeyPath<State, ChildState>,
    embed: @escaping @Sendable (ChildAction) -> Action
  ) -> Store<ChildState, ChildAction> {
    if let root = self.root {
      // The common case, scoping a root store: the scoped core's send path is formed here,
      // specialized for these types in the caller's module.
      let scoped = ScopedCore(
        rootStore: self,
        root: root,
        state: SendableKeyPath(state),
        embed: embed,
        sendPath: { core, action, location in core.sendNow(action, location: location) }
      )
      // Safety: as below; the core is only used on the executor both stores share.
      nonisolated(unsafe) let core: StoreCore<ChildState, ChildAction> = scoped
      return Store<ChildState, ChildAction>(anchor: self.anchor, core: core)
    }
    return self.scopeThroughCore(state: state, embed: embed)
  }

  @usableFromInline
  nonisolated func scopeThroughCore<ChildState: Sendable, ChildAction: Sendable>(
    state: WritableKeyPath<State, ChildState>,
    embed: @escaping @Sendable (ChildAction) -> Action
  ) -> Store<ChildState, ChildAction> {
    // Safety: the scoped core references this store's core; both are only used on the executor
    // the scoped store shares with this one, so handing it to the new store races with nothing.
    nonisolated(unsafe) let core = self.core.scoped(by: self, state: state, embed: embed)
    return Store<ChildState, ChildAction>(anchor: self.anchor, core: core)
  }
}

/// The core of a scoped store: reads and sends straight through its root's core.
///
/// A scoped store shares its root's executor, and cores are only used on that executor, so it
/// calls the root core directly: no hop, no `assumeIsolated`, and the root's specialized send
/// path. Scoping a scoped store composes the state paths and the embeddings.
@usableFromInline
final class ScopedCore<RootState: Sendable, RootAction: Sendable, State: Sendable, Action: Sendable>:
  StoreCore<State, Action>
{
  @usableFromInline let rootStore: Store<RootState, RootAction>
  @usableFromInline let root: RootCore<RootState, RootAction>
  @usableFromInline let statePath: SendableKeyPath<RootState, State>
  /// Embeds a child action into a root action.
  @usableFromInline let embed: @Sendable (Action) -> RootAction
  /// `sendNow(_:location:)`, formed specialized by the inlinable `scope` (see
  /// `RootCore.sendPath` for why); `nil` for a scope of a scope, formed in the library.
  @usableFromInline let sendPath: ((ScopedCore, Action, SourceLocation) -> StoreTask)?

  @usableFromInline
  init(
    rootStore: Store<RootState, RootAction>,
    root: RootCore<RootState, RootAction>,
    state: SendableKeyPath<RootState, State>,
    embed: @escaping @Sendable (Action) -> RootAction,
    sendPath: ((ScopedCore, Action, SourceLocation) -> StoreTask)? = nil
  ) {
    self.sendPath = sendPath
    self.rootStore = rootStore
    self.root = root
    self.statePath = state
    self.embed = embed
    super.init(runtime: root.runtime)
  }

  override var state: State {
    self.root.currentState[keyPath: self.statePath.value]
  }

  override var isShutDown: Bool {
    self.root.isShutDown
  }

  override func send(_ action: Action, location: SourceLocation) -> StoreTask {
    if let sendPath = self.sendPath {
      return sendPath(self, action, location)
    }
    return self.sendNow(action, location: location)
  }

  @inlinable
  func sendNow(_ action: Action, location: SourceLocation) -> StoreTask {
    if !self.root.isAttached {
      self.root.attach(to: self.rootStore)
    }
    return self.root.sendPath(self.root, self.embed(action), location)
  }

  override func shutdown() async {
    await self.rootStore.shutdown()
  }

  override func shutdown(gracePeriod: Duration, clock: (any Clock<Duration>)?) async {
    await self.rootStore.shutdown(gracePeriod: gracePeriod, clock: clock)
  }

  override func subscribeToStates() -> StateSubscription<State>? {
    guard let base = self.root.subscribeToStates() else { return nil }
    let path = self.statePath
    return MappedSubscription(base: base) { $0[keyPath: path.value] }
  }

  override func scoped<ChildState: Sendable, ChildAction: Sendable>(
    by store: Store<State, Action>,
    state: WritableKeyPath<State, ChildState>,
    embed: @escaping @Sendable (ChildAction) -> Action
  ) -> StoreCore<ChildState, ChildAction> {
    let parentEmbed = self.embed
    return ScopedCore<RootState, RootAction, ChildState, ChildAction>(
      rootStore: self.rootStore,
      root: self.root,
      state: SendableKeyPath(self.statePath.value.appending(path: state)),
      embed: { child in parentEmbed(embed(child)) }
    )
  }
}

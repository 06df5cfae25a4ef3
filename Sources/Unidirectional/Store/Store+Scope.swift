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
  /// The action key path is an enum property (`var counter: Counter.Action? { get set }`).
  /// Its enum case is found once, from the action type's metadata: the case whose payload is
  /// the child's action type (`case counter(Counter.Action)`, labelled or not) and which the
  /// property's getter reads. So the first `send` works with no parent action to write into,
  /// and so do setters that only write into their own case. If no such case exists (the action
  /// type is not an enum, or the payload is a tuple of several values or an `indirect` case),
  /// the child action is written into the first action the root reduced; until then, `send`
  /// reports an issue. Scoping with an embedding function (`action: AppAction.counter`) or an
  /// ``AnyCasePath`` always works.
  @inlinable
  public nonisolated func scope<ChildState: Sendable, ChildAction: Sendable>(
    state: WritableKeyPath<State, ChildState>,
    action: WritableKeyPath<Action, ChildAction?>
  ) -> Store<ChildState, ChildAction> {
    let embedder = KeyPathEmbedder(action)
    return self.scope(state: state) { child, template in
      embedder.embed(child, template: template)
    }
  }

  /// A scoped store whose actions are embedded by a case path.
  @inlinable
  public nonisolated func scope<ChildState: Sendable, ChildAction: Sendable>(
    state: WritableKeyPath<State, ChildState>,
    action: AnyCasePath<Action, ChildAction>
  ) -> Store<ChildState, ChildAction> {
    self.scope(state: state) { child, _ in action.embed(child) }
  }

  /// A scoped store whose actions are embedded by a function, such as an enum case:
  /// `store.scope(state: \.counter, action: AppAction.counter)`.
  @inlinable
  public nonisolated func scope<ChildState: Sendable, ChildAction: Sendable>(
    state: WritableKeyPath<State, ChildState>,
    action embed: @escaping @Sendable (ChildAction) -> Action
  ) -> Store<ChildState, ChildAction> {
    self.scope(state: state) { child, _ in embed(child) }
  }

  @inlinable
  nonisolated func scope<ChildState: Sendable, ChildAction: Sendable>(
    state: WritableKeyPath<State, ChildState>,
    embed: @escaping @Sendable (ChildAction, () -> Action?) -> Action?
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
    embed: @escaping @Sendable (ChildAction, () -> Action?) -> Action?
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
  /// Embeds a child action into a root action; the function gives the root's template action.
  @usableFromInline let embed: @Sendable (Action, () -> RootAction?) -> RootAction?
  /// `sendNow(_:location:)`, formed specialized by the inlinable `scope` (see
  /// `RootCore.sendPath` for why); `nil` for a scope of a scope, formed in the library.
  @usableFromInline let sendPath: ((ScopedCore, Action, SourceLocation) -> StoreTask)?

  @usableFromInline
  init(
    rootStore: Store<RootState, RootAction>,
    root: RootCore<RootState, RootAction>,
    state: SendableKeyPath<RootState, State>,
    embed: @escaping @Sendable (Action, () -> RootAction?) -> RootAction?,
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
    // NB: the template is read only by a key path that cannot build its case (see
    // `KeyPathEmbedder`): passed as a function, so other sends do not copy it.
    guard let rootAction = self.embed(action, { self.root.firstSentAction }) else {
      self.reportMissingTemplate(for: action, at: location)
      return StoreTask(nil)
    }
    if !self.root.isAttached {
      self.root.attach(to: self.rootStore)
    }
    return self.root.sendPath(self.root, rootAction, location)
  }

  @usableFromInline
  func reportMissingTemplate(for action: Action, at location: SourceLocation) {
    location.report(
      """
      A store scoped with a key path could not embed an action in its parent's action.

        Action: \(debugDescription(of: action))

      No enum case of the parent action carries exactly this action type and is read by the \
      key path, and the root has reduced no action it could write into. Scope with an \
      embedding function instead: 'store.scope(state: \\.child, action: ParentAction.child)'.
      """
    )
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
    embed: @escaping @Sendable (ChildAction, () -> Action?) -> Action?
  ) -> StoreCore<ChildState, ChildAction> {
    let parentEmbed = self.embed
    return ScopedCore<RootState, RootAction, ChildState, ChildAction>(
      rootStore: self.rootStore,
      root: self.root,
      state: SendableKeyPath(self.statePath.value.appending(path: state)),
      embed: { child, rootTemplate in
        // NB: there is no template at this level: a key path embeds only through its case.
        guard let action = embed(child, { nil }) else { return nil }
        return parentEmbed(action, rootTemplate)
      }
    )
  }
}

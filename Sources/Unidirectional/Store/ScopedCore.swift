/// The core of a scoped store: reads and sends straight through its root's core.
///
/// A scoped store shares its root's executor, and cores are only used on that executor, so it
/// calls the root core directly: no hop, no `assumeIsolated`, and the root's specialized send
/// path. Scoping a scoped store composes the state paths and the embeddings.
@usableFromInline
final class ScopedCore<
  RootState: Sendable,
  RootAction: Sendable,
  State: Sendable,
  Action: Sendable
>:
  StoreCore
{
  @usableFromInline let root: RootCore<RootState, RootAction>
  @usableFromInline let statePath: WritableKeyPath<RootState, State>
  @usableFromInline let embed: @Sendable (Action) -> RootAction
  /// `sendNow(_:location:)`, formed specialized by the inlinable `Store.scope` (see
  /// `RootCore.sendAction` for why); `nil` for a scope of a scope, formed in the library.
  @usableFromInline let sendAction: ((ScopedCore, Action, SourceLocation) -> StoreTask)?

  @usableFromInline
  init(
    root: RootCore<RootState, RootAction>,
    state: WritableKeyPath<RootState, State>,
    embed: @escaping @Sendable (Action) -> RootAction,
    sendAction: ((ScopedCore, Action, SourceLocation) -> StoreTask)? = nil
  ) {
    self.root = root
    self.statePath = state
    self.embed = embed
    self.sendAction = sendAction
  }

  @usableFromInline
  var state: State {
    self.root.currentState[keyPath: self.statePath]
  }

  @usableFromInline
  var isShutDown: Bool {
    self.root.isShutDown
  }

  @usableFromInline
  var supervisor: EffectSupervisor? {
    self.root.supervisor
  }

  @usableFromInline var phasedShutdown: any PhasedShutdown {
    self.root
  }

  @usableFromInline
  func send(_ action: Action, location: SourceLocation) -> StoreTask {
    if let sendAction = self.sendAction {
      return sendAction(self, action, location)
    }
    return self.sendNow(action, location: location)
  }

  @usableFromInline
  func trySend(_ action: Action, location: SourceLocation) -> StoreTask? {
    self.root.trySend(self.embed(action), location: location)
  }

  @inlinable
  func sendNow(_ action: Action, location: SourceLocation) -> StoreTask {
    self.root.sendAction(self.root, self.embed(action), location)
  }

  @usableFromInline
  func shutdown() async {
    await self.root.shutdown()
  }

  @usableFromInline
  func shutdown(gracePeriod: Duration, clock: (any Clock<Duration>)?) async {
    await self.root.shutdown(gracePeriod: gracePeriod, clock: clock)
  }

  @usableFromInline
  func subscribeToStates() -> StateSubscription<State>? {
    let path = Immutable(self.statePath)
    return self.root.subscribeToStates()?.map { $0[keyPath: path.value] }
  }

  @usableFromInline
  func scoped<ChildState: Sendable, ChildAction: Sendable>(
    state: WritableKeyPath<State, ChildState>,
    embed: @escaping @Sendable (ChildAction) -> Action
  ) -> any StoreCore<ChildState, ChildAction> {
    let parentEmbed = self.embed
    return ScopedCore<RootState, RootAction, ChildState, ChildAction>(
      root: self.root,
      state: self.statePath.appending(path: state),
      embed: { child in parentEmbed(embed(child)) }
    )
  }
}

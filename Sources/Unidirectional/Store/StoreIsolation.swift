/// The executor a root store and all its scoped stores share, and the way effects reach the
/// root core without holding the store.
///
/// A store implements `unownedExecutor` (so scoped stores can share it), which makes it a
/// non-default actor; borrowing this default actor's executor keeps the default-actor
/// scheduling, which follows a task's executor preference (SE-0417): the test store relies on
/// that to run a store, its effects and everything they call on one hand-drained executor.
///
/// Effects deliver through ``receive(_:from:)``, which reads ``root`` here, on the executor: no
/// lock. The reference is set when the store submits its first asynchronous effect and dropped
/// when its effects have all ended after shutdown (the last effect task to end), so a `Send` kept
/// past its effect never keeps the store's state alive.
@usableFromInline final actor StoreIsolation<State: Sendable, Action: Sendable>: EffectReceiver {
  @usableFromInline var root: RootCore<State, Action>?

  @usableFromInline init() {}

  /// Hands an action from an effect to the root core.
  @inlinable
  func receive(_ action: Action, from token: any EffectUnit) {
    if let root = self.root {
      root.receiveAction(root, action, token)
    } else if token.isFinished && !token.isCancelled {
      // The store is gone, and this effect had returned before it went.
      reportSendAfterFinish(action, to: IssueReporter.current)
    }
  }

  /// Lets go of the root core: the store has shut down and its effects have ended.
  func release() {
    self.root = nil
  }
}

/// Feeds actions from a running effect back into the store.
///
/// Effects receive a `Send` from ``Effect/run(priority:operation:catch:fileID:filePath:line:column:)``
/// and call it like a function:
///
/// ```swift
/// return .run { send in
///   await send(.started)
///   await send(.finished(try await work()))
/// }
/// ```
///
/// `await send(action)` returns once the store has reduced the action (and the actions it sent
/// synchronously). Once the effect has been cancelled, its actions never reach a reducer: the
/// store checks that on its own executor when the action arrives.
public struct Send<Action: Sendable>: Sendable {
  @usableFromInline let send: (@Sendable (Action) async -> Void)?
  /// The effect this sends for, when the store made it: it delivers to the store (no closure
  /// context to allocate per effect).
  @usableFromInline let job: RunJob<Action>?

  /// Creates a `Send` from a closure, for example to drive an effect's body in a test.
  public init(send: @escaping @Sendable (Action) async -> Void) {
    self.send = send
    self.job = nil
  }

  /// The `Send` of one effect of a store.
  ///
  /// NB: inlinable: made in the effect's task, where a call would look up `Send<Action>`'s
  /// metadata at run time for every effect.
  @inlinable
  init(job: RunJob<Action>) {
    // NB: no placeholder closure: in generic code an empty closure still captures `Action`'s
    // metadata, an allocation per effect.
    self.send = nil
    self.job = job
  }

  /// Sends an action back into the store and waits until the store has reduced it.
  ///
  /// NB: inlinable, so it is specialized in the feature's module, where effects call it.
  @inlinable
  public func callAsFunction(_ action: Action) async {
    if let job = self.job {
      await job.deliver(action)
    } else if let send = self.send {
      await send(action)
    }
  }
}

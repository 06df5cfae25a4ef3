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
  let send: @Sendable (Action) async -> Void

  /// Creates a `Send` from a closure, for example to drive an effect's body in a test.
  public init(send: @escaping @Sendable (Action) async -> Void) {
    self.send = send
  }

  /// Sends an action back into the store and waits until the store has reduced it.
  public func callAsFunction(_ action: Action) async {
    await self.send(action)
  }
}

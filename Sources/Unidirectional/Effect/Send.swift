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
  /// The effect this sends for, when the store made it: then `send` is the store's delivery
  /// function, called with the box (no closure context to allocate per effect).
  @usableFromInline let box: EffectBox?
  @usableFromInline let deliver: (@Sendable (Action, EffectBox) async -> Void)?

  /// Creates a `Send` from a closure, for example to drive an effect's body in a test.
  public init(send: @escaping @Sendable (Action) async -> Void) {
    self.send = send
    self.box = nil
    self.deliver = nil
  }

  /// The `Send` of one effect of a store.
  init(box: EffectBox, deliver: @escaping @Sendable (Action, EffectBox) async -> Void) {
    // NB: no placeholder closure: in generic code an empty closure still captures `Action`'s
    // metadata, an allocation per effect.
    self.send = nil
    self.box = box
    self.deliver = deliver
  }

  /// Sends an action back into the store and waits until the store has reduced it.
  ///
  /// NB: inlinable, so it is specialized in the feature's module, where effects call it.
  @inlinable
  public func callAsFunction(_ action: Action) async {
    if let box = self.box, let deliver = self.deliver {
      await deliver(action, box)
    } else if let send = self.send {
      await send(action)
    }
  }
}

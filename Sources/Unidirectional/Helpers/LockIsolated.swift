/// A value protected by a lock, for sharing mutable state with effects and dependency doubles.
///
/// ```swift
/// let calls = LockIsolated(0)
/// let client = APIClient(fetch: { _ in calls.withValue { $0 += 1 }; return "ok" })
/// ...
/// #expect(calls.value == 1)
/// ```
public final class LockIsolated<Value: Sendable>: Sendable {
  private let storage: LockedBox<Value>

  /// Creates a box holding `value`.
  public init(_ value: Value) {
    self.storage = LockedBox(value)
  }

  /// The current value.
  public var value: Value {
    self.storage.withLock { $0 }
  }

  /// Reads or changes the value while holding the lock.
  ///
  /// - Parameter operation: Receives the value `inout`; runs with the lock held, so keep it
  ///   short and never call back into code that takes this box.
  /// - Returns: What `operation` returns.
  @discardableResult
  public func withValue<T: Sendable>(_ operation: (inout Value) throws -> T) rethrows -> T {
    try self.storage.withLock(operation)
  }

  /// Replaces the value.
  public func setValue(_ newValue: Value) {
    self.storage.withLock { $0 = newValue }
  }
}

/// A value isolated to an actor, for sharing mutable state with effects in tests.
///
/// ```swift
/// let events = ActorIsolated<[String]>([])
/// ...
/// await events.withValue { $0.append("started") }
/// #expect(await events.value == ["started"])
/// ```
public final actor ActorIsolated<Value: Sendable> {
  /// The current value.
  public var value: Value

  /// Creates an actor holding `value`.
  public init(_ value: Value) {
    self.value = value
  }

  /// Reads or changes the value on the actor.
  @discardableResult
  public func withValue<T: Sendable>(
    _ operation: @Sendable (inout Value) throws -> T
  ) rethrows -> T {
    try operation(&self.value)
  }

  /// Replaces the value.
  public func setValue(_ newValue: Value) {
    self.value = newValue
  }
}

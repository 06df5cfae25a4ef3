/// A cancellation identifier: its type, its value, and the child feature it was made in.
///
/// Keyed by type and value, so `1` and `"1"` never collide (nor `1 as Int` and `1 as UInt8`, which
/// `AnyHashable` alone would merge). An identifier made while an `ifLet` or `forEach` child reducer
/// runs carries that child's ``CancelScope``, so equal identifiers in two rows name different
/// effects, as in the Composable Architecture.
@usableFromInline struct CancelKey: Hashable, Sendable, CustomStringConvertible {
  // Safety: `AnyHashable` is not `Sendable`; `value` is only ever built from a
  // `Hashable & Sendable` identifier (see `init`), so sharing it is sound.
  private nonisolated(unsafe) let value: AnyHashable
  private let type: ObjectIdentifier
  private let scope: CancelScope?

  /// The identifier, scoped to the child feature whose reducer is running (if any).
  init<ID: Hashable & Sendable>(_ id: ID) {
    self.init(id, scope: DependencyValues.current.cancelScope)
  }

  /// The identity of a child state (its `Identifiable` id), as a key of its own.
  ///
  /// Safety: the identity is only hashed, compared and described, never handed out, so sharing its
  /// box is sound even when the id's type is not declared `Sendable`.
  init(identity: AnyHashable) {
    self.value = identity
    self.type = ObjectIdentifier(AnyHashable.self)
    self.scope = nil
  }

  init<ID: Hashable & Sendable>(_ id: ID, scope: CancelScope?) {
    // Safety: `id` is `Sendable`; the `AnyHashable` box only wraps it.
    self.value = AnyHashable(id)
    self.type = ObjectIdentifier(ID.self)
    self.scope = scope
  }

  @usableFromInline static func == (lhs: Self, rhs: Self) -> Bool {
    lhs.type == rhs.type && lhs.value == rhs.value && lhs.scope == rhs.scope
  }

  @usableFromInline func hash(into hasher: inout Hasher) {
    hasher.combine(self.type)
    hasher.combine(self.value)
    hasher.combine(self.scope)
  }

  /// The identifier as the user wrote it, for diagnostics.
  @usableFromInline var description: String {
    "\(self.value.base)"
  }
}

/// Where a child feature's cancellation identifiers live: the `ifLet`/`forEach` element whose
/// reducer is running.
///
/// The element's own key carries the scope it was made in, so scopes nest.
final class CancelScope: Hashable, Sendable {
  /// The element: its collection's key path and its identity, in the parent's scope.
  let element: CancelKey

  init(element: CancelKey) {
    self.element = element
  }

  static func == (lhs: CancelScope, rhs: CancelScope) -> Bool {
    lhs === rhs || lhs.element == rhs.element
  }

  func hash(into hasher: inout Hasher) {
    hasher.combine(self.element)
  }
}

/// Runs a child reducer with the cancellation identifiers it makes scoped to `element`.
func withCancelScope<R>(_ element: CancelKey, _ body: () -> R) -> R {
  var values = DependencyValues.current
  values.cancelScope = CancelScope(element: element)
  return DependencyValues.withValues(values, body)
}

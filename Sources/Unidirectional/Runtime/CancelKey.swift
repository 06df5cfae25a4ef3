/// A cancellation identifier: its type, its value, and the child feature it was made in.
///
/// Keyed by type and value, so `1` and `"1"` never collide (nor `1 as Int` and `1 as UInt8`,
/// which `AnyHashable` alone would merge). An identifier made while an `ifLet` or `forEach`
/// child reducer runs carries that child's ``CancelScope``, so equal identifiers in two rows
/// name different effects, as in the Composable Architecture.
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

/// Where a child feature's cancellation identifiers live: the path of `ifLet`/`forEach`
/// elements from the root feature down to it.
final class CancelScope: Hashable, Sendable {
  let parent: CancelScope?
  /// The element: its collection's key path and its identity.
  let element: CancelKey
  private let hashValueCache: Int

  init(parent: CancelScope?, element: CancelKey) {
    self.parent = parent
    self.element = element
    var hasher = Hasher()
    hasher.combine(parent)
    hasher.combine(element)
    self.hashValueCache = hasher.finalize()
  }

  static func == (lhs: CancelScope, rhs: CancelScope) -> Bool {
    lhs === rhs
      || (lhs.hashValueCache == rhs.hashValueCache && lhs.element == rhs.element
        && lhs.parent == rhs.parent)
  }

  func hash(into hasher: inout Hasher) {
    hasher.combine(self.hashValueCache)
  }
}

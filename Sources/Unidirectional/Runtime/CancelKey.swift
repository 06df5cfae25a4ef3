/// A cancellation identifier: its type, its value, and the child feature it was made in.
///
/// Keyed by type and value (``CancelValue``). An identifier made while an `ifLet` or `forEach`
/// child reducer runs carries that child's ``CancelScope``, so equal identifiers in two rows name
/// different effects, as in the Composable Architecture.
@usableFromInline struct CancelKey: Hashable, Sendable, CustomStringConvertible {
  @usableFromInline let value: CancelValue
  @usableFromInline let scope: CancelScope?

  /// The identifier, scoped to the child feature whose reducer is running (if any).
  @inlinable
  init<ID: Hashable & Sendable>(_ id: ID) {
    self.init(id, scope: currentCancelScope())
  }

  /// The identity of a child state (its `Identifiable` id), as a key of its own.
  init(identity: AnyHashable) {
    self.init(Identity(value: identity), scope: nil)
  }

  @inlinable
  init<ID: Hashable & Sendable>(_ id: ID, scope: CancelScope?) {
    self.value = TypedCancelValue(id)
    self.scope = scope
  }

  @usableFromInline static func == (lhs: Self, rhs: Self) -> Bool {
    (lhs.value === rhs.value || lhs.value.isEqual(to: rhs.value)) && lhs.scope == rhs.scope
  }

  @usableFromInline func hash(into hasher: inout Hasher) {
    self.value.hash(into: &hasher)
    hasher.combine(self.scope)
  }

  /// The identifier as the user wrote it, for diagnostics.
  @usableFromInline var description: String {
    self.value.description
  }

  /// A child state's identity: only hashed, compared and described, never handed out.
  // Safety: the `AnyHashable` is never read but to hash, compare and describe it, so sharing
  // its box is sound even when the id's type is not declared `Sendable`.
  private struct Identity: Hashable, @unchecked Sendable, CustomStringConvertible {
    let value: AnyHashable
    var description: String { "\(self.value.base)" }
  }
}

/// The scope of the child feature whose reducer is running, if any.
@usableFromInline
func currentCancelScope() -> CancelScope? {
  DependencyValues.current.cancelScope
}

/// A cancellation identifier's value, type-erased with the type's own `==` (a class of our own
/// instead of `AnyHashable`, whose `==` looked up generic metadata on every comparison: ~14% of a
/// cancellable `.send`).
///
/// Keyed by type and value, so `1` and `"1"` never collide (nor `1 as Int` and `1 as UInt8`, which
/// `AnyHashable` alone would merge).
// Safety: immutable; subclasses hold only a `Sendable` identifier.
@usableFromInline class CancelValue: @unchecked Sendable, CustomStringConvertible {
  @usableFromInline init() {}

  /// Feeds the identifier and its type to `hasher`.
  ///
  /// NB: hashed on demand, not stored: a stored hash made the box of a one-byte enum identifier
  /// (the usual `enum CancelID { case timer }`) a 48 B allocation instead of 32, in every armed
  /// store. It is needed only once a store's identifiers outgrow their inline map, and fed to the
  /// key's own hasher (no hasher of its own to finalize).
  @usableFromInline func hash(into hasher: inout Hasher) {}

  /// Whether `other` holds an identifier of the same type and value.
  @usableFromInline func isEqual(to other: CancelValue) -> Bool { false }

  @usableFromInline var description: String { "" }
}

/// A ``CancelValue`` of one identifier type.
// Safety: immutable; `ID` is `Sendable`.
@usableFromInline
final class TypedCancelValue<ID: Hashable & Sendable>: CancelValue,
  @unchecked Sendable
{
  @usableFromInline let id: ID

  @inlinable init(_ id: ID) {
    self.id = id
    super.init()
  }

  @usableFromInline override func hash(into hasher: inout Hasher) {
    hasher.combine(ObjectIdentifier(ID.self))
    hasher.combine(self.id)
  }

  @usableFromInline override func isEqual(to other: CancelValue) -> Bool {
    guard type(of: other) == Self.self else { return false }
    return unsafeDowncast(other, to: Self.self).id == self.id
  }

  @usableFromInline override var description: String { "\(self.id)" }
}

/// Where a child feature's cancellation identifiers live: the `ifLet`/`forEach` element whose
/// reducer is running.
///
/// The element's own key carries the scope it was made in, so scopes nest.
@usableFromInline final class CancelScope: Hashable, Sendable {
  /// The element: its collection's key path and its identity, in the parent's scope.
  let element: CancelKey

  init(element: CancelKey) {
    self.element = element
  }

  @usableFromInline static func == (lhs: CancelScope, rhs: CancelScope) -> Bool {
    lhs === rhs || lhs.element == rhs.element
  }

  @usableFromInline func hash(into hasher: inout Hasher) {
    hasher.combine(self.element)
  }
}

/// Runs a child reducer with the cancellation identifiers it makes scoped to `element`.
func withCancelScope<R>(_ element: CancelKey, _ body: () -> R) -> R {
  var values = DependencyValues.current
  values.cancelScope = CancelScope(element: element)
  return DependencyValues.withValues(values, body)
}

/// The cancellation identifiers of one unit of effect work: a small list that allocates nothing
/// while it holds at most one (most effects have none or one; a `[key]` array and a `keys + [key]`
/// concatenation were two allocations per re-armed timer).
@usableFromInline struct CancelKeys: Sendable, Sequence, ExpressibleByArrayLiteral {
  @usableFromInline enum Storage: Sendable {
    case none
    case one(CancelKey)
    case many([CancelKey])
  }

  @usableFromInline var storage: Storage

  @inlinable init() {
    self.storage = .none
  }

  @inlinable init(_ key: CancelKey) {
    self.storage = .one(key)
  }

  @usableFromInline init(_ keys: [CancelKey]) {
    switch keys.count {
    case 0: self.storage = .none
    case 1: self.storage = .one(keys[0])
    default: self.storage = .many(keys)
    }
  }

  @usableFromInline init(arrayLiteral keys: CancelKey...) {
    self.init(keys)
  }

  @usableFromInline var isEmpty: Bool {
    if case .none = self.storage { return true }
    return false
  }

  /// Whether these are `key` and nothing else.
  func isOnly(_ key: CancelKey) -> Bool {
    guard case .one(let only) = self.storage else { return false }
    return only == key
  }

  /// These identifiers and then `key`.
  @usableFromInline func appending(_ key: CancelKey) -> CancelKeys {
    switch self.storage {
    case .none: CancelKeys(key)
    case .one(let first): CancelKeys([first, key])
    case .many(let keys): CancelKeys(keys + [key])
    }
  }

  @usableFromInline func makeIterator() -> Iterator {
    switch self.storage {
    case .none: Iterator(state: .done)
    case .one(let key): Iterator(state: .one(key))
    case .many(let keys): Iterator(state: .many(keys.makeIterator()))
    }
  }

  @usableFromInline struct Iterator: IteratorProtocol {
    enum State {
      case done
      case one(CancelKey)
      case many(IndexingIterator<[CancelKey]>)
    }

    var state: State

    @usableFromInline mutating func next() -> CancelKey? {
      switch self.state {
      case .done:
        return nil
      case .one(let key):
        self.state = .done
        return key
      case .many(var iterator):
        self.state = .done
        guard let key = iterator.next() else { return nil }
        self.state = .many(iterator)
        return key
      }
    }
  }
}

/// A cancellation identifier: its type, its value, and the child feature it was made in.
///
/// Keyed by type and value (``CancelIdentity``). An identifier made while an `ifLet` or `forEach`
/// child reducer runs carries that child's ``CancelScope``, so equal identifiers in two rows name
/// different effects, as in the Composable Architecture.
@usableFromInline struct CancelKey: Hashable, Sendable, CustomStringConvertible {
  @usableFromInline let identity: CancelIdentity
  @usableFromInline let scope: CancelScope?

  /// The identifier, scoped to the child feature whose reducer is running (if any).
  @inlinable
  init<ID: Hashable & Sendable>(_ id: ID) {
    self.init(id, scope: currentCancelScope())
  }

  /// The identity of a child state (its `Identifiable` id), as a key of its own.
  init(identity: AnyHashable) {
    self.init(Immutable(identity), scope: nil)
  }

  @inlinable
  init<ID: Hashable & Sendable>(_ id: ID, scope: CancelScope?) {
    self.identity = CancelIdentity(id)
    self.scope = scope
  }

  @usableFromInline static func == (lhs: Self, rhs: Self) -> Bool {
    lhs.identity == rhs.identity && lhs.scope == rhs.scope
  }

  @usableFromInline func hash(into hasher: inout Hasher) {
    self.identity.hash(into: &hasher)
    hasher.combine(self.scope)
  }

  /// The identifier as the user wrote it, for diagnostics.
  @usableFromInline var description: String {
    self.identity.description
  }
}

/// The scope of the child feature whose reducer is running, if any.
@usableFromInline
func currentCancelScope() -> CancelScope? {
  DependencyValues.current.cancelScope
}

/// A cancellation identifier's value, type-erased with the type's own `==` and `hash(into:)`.
///
/// Keyed by type and value, so `1` and `"1"` never collide (nor `1 as Int` and `1 as UInt8`, which
/// `AnyHashable` alone would merge).
///
/// NB: an identifier of a plain type of at most 8 bytes (the usual `enum CancelID { case timer }`,
/// an `Int`) is kept in place, as its bits and its type, with no allocation: boxed, it cost every
/// `.cancellable(id:)` and every re-armed idle timer an allocation (half of a re-arm's two). The
/// type is the metatype of its ``TypedCancelValue``, whose class methods compare, hash and
/// describe the bits as an `ID`. Any other identifier is boxed. Not `AnyHashable`, whose `==`
/// looked up generic metadata on every comparison.
@usableFromInline enum CancelIdentity: Sendable, Hashable, CustomStringConvertible {
  /// A plain identifier of at most 8 bytes: its bits (zero beyond its size), and its type.
  case inline(UInt64, CancelValue.Type)
  /// Any other identifier.
  case boxed(CancelValue)

  @inlinable init<ID: Hashable & Sendable>(_ id: ID) {
    if _isPOD(ID.self), MemoryLayout<ID>.size <= 8, MemoryLayout<ID>.alignment <= 8 {
      var bits: UInt64 = 0
      withUnsafeMutableBytes(of: &bits) { $0.storeBytes(of: id, as: ID.self) }
      self = .inline(bits, TypedCancelValue<ID>.self)
    } else {
      self = .boxed(TypedCancelValue(id))
    }
  }

  @usableFromInline static func == (lhs: Self, rhs: Self) -> Bool {
    switch (lhs, rhs) {
    case (.inline(let left, let type), .inline(let right, let otherType)):
      // NB: equal bits of one plain type are one value; unequal ones may still be equal to
      // the type's `==` (padding, or an `==` of its own), which decides.
      guard ObjectIdentifier(type) == ObjectIdentifier(otherType) else { return false }
      return left == right || type.inlineEqual(left, right)
    case (.boxed(let left), .boxed(let right)):
      return left === right || left.isEqual(to: right)
    case (.inline, .boxed), (.boxed, .inline):
      // One type is always kept the same way, so these are two types.
      return false
    }
  }

  @usableFromInline func hash(into hasher: inout Hasher) {
    switch self {
    case .inline(let bits, let type): type.inlineHash(bits, into: &hasher)
    case .boxed(let value): value.hash(into: &hasher)
    }
  }

  @usableFromInline var description: String {
    switch self {
    case .inline(let bits, let type): type.inlineDescription(bits)
    case .boxed(let value): value.description
    }
  }
}

/// A boxed identifier of any type (``CancelIdentity/boxed(_:)``); its subclass's metatype is the
/// type of an identifier kept in place (``CancelIdentity/inline(_:_:)``).
// Safety: immutable; subclasses hold only a `Sendable` identifier.
@usableFromInline class CancelValue: @unchecked Sendable, CustomStringConvertible {
  @usableFromInline init() {}

  /// Feeds the identifier and its type to `hasher`.
  ///
  /// NB: hashed on demand, not stored: a stored hash made a box 48 B instead of 32. It is needed
  /// only once a store's identifiers outgrow their inline map, and fed to the key's own hasher
  /// (no hasher of its own to finalize).
  @usableFromInline func hash(into hasher: inout Hasher) {}

  /// Whether `other` holds an identifier of the same type and value.
  @usableFromInline func isEqual(to other: CancelValue) -> Bool { false }

  @usableFromInline var description: String { "" }

  /// Whether two identifiers kept in place as bits of this type are equal.
  @usableFromInline class func inlineEqual(_ left: UInt64, _ right: UInt64) -> Bool { false }

  /// Feeds an identifier kept in place as bits of this type, and the type, to `hasher`.
  @usableFromInline class func inlineHash(_ bits: UInt64, into hasher: inout Hasher) {}

  /// An identifier kept in place as bits of this type, as the user wrote it.
  @usableFromInline class func inlineDescription(_ bits: UInt64) -> String { "" }
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

  /// The identifier whose bits these are (``CancelIdentity/init(_:)`` kept only plain values of
  /// at most 8 bytes so).
  private static func load(_ bits: UInt64) -> ID {
    withUnsafeBytes(of: bits) { $0.load(as: ID.self) }
  }

  @usableFromInline override class func inlineEqual(_ left: UInt64, _ right: UInt64) -> Bool {
    Self.load(left) == Self.load(right)
  }

  @usableFromInline override class func inlineHash(_ bits: UInt64, into hasher: inout Hasher) {
    hasher.combine(ObjectIdentifier(ID.self))
    hasher.combine(Self.load(bits))
  }

  @usableFromInline override class func inlineDescription(_ bits: UInt64) -> String {
    "\(Self.load(bits))"
  }
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
@usableFromInline
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

/// A value the library shares across tasks though its type is not `Sendable`: a key path, or an
/// `AnyHashable` identity.
// The library only reads the wrapped value: it subscripts with a key path, and hashes, compares
// and describes an identity. Key paths are immutable values built from stored and computed
// properties; an `AnyHashable`'s box is immutable too. The library wraps nothing else. Its test:
// `PrimitiveStressTests.anImmutableValueReadsTheSameFromEveryTask` (many tasks read one value at
// once; CI runs it under ThreadSanitizer).
// Safety: the value is a `let`, never mutated after it is made, and only read (as just said).
@usableFromInline struct Immutable<Value>: @unchecked Sendable {
  @usableFromInline let value: Value

  @inlinable
  init(_ value: Value) {
    self.value = value
  }
}

extension Immutable: Equatable where Value: Equatable {
  @usableFromInline static func == (lhs: Self, rhs: Self) -> Bool {
    lhs.value == rhs.value
  }
}

extension Immutable: Hashable where Value: Hashable {
  @usableFromInline func hash(into hasher: inout Hasher) {
    self.value.hash(into: &hasher)
  }
}

extension Immutable: CustomStringConvertible {
  @usableFromInline var description: String {
    String(describing: self.value)
  }
}

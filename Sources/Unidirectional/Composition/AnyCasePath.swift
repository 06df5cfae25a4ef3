/// A way to embed a value into an enum case and extract it back: the action half of
/// ``Scope`` when a key path will not do.
///
/// ```swift
/// Scope(
///   state: \.counter,
///   action: AnyCasePath(embed: AppAction.counter, extract: {
///     guard case .counter(let action) = $0 else { return nil }
///     return action
///   })
/// ) {
///   Counter()
/// }
/// ```
public struct AnyCasePath<Root, Value>: Sendable {
  @usableFromInline let _embed: @Sendable (Value) -> Root
  @usableFromInline let _extract: @Sendable (Root) -> Value?

  /// Creates a case path from its two directions.
  public init(
    embed: @escaping @Sendable (Value) -> Root,
    extract: @escaping @Sendable (Root) -> Value?
  ) {
    self._embed = embed
    self._extract = extract
  }

  /// The root holding `value` in this case.
  @inlinable
  public func embed(_ value: Value) -> Root {
    self._embed(value)
  }

  /// The value, when `root` is in this case.
  @inlinable
  public func extract(from root: Root) -> Value? {
    self._extract(root)
  }
}

/// How a parent action carries a child action: extracts it, and embeds child actions (from the
/// child's effects) back into parent actions, using the parent action they answer as template.
///
/// Extracting allocates nothing; an embedding closure is built only for effects that exist.
@usableFromInline
struct ActionEmbedding<Parent: Sendable, Child: Sendable>: Sendable {
  @usableFromInline
  enum Path: Sendable {
    case keyPath(Immutable<WritableKeyPath<Parent, Child?>>)
    case casePath(AnyCasePath<Parent, Child>)
  }

  @usableFromInline let path: Path

  @inlinable
  init(_ casePath: AnyCasePath<Parent, Child>) {
    self.path = .casePath(casePath)
  }

  @inlinable @inline(__always)
  init(_ keyPath: WritableKeyPath<Parent, Child?>) {
    self.path = .keyPath(Immutable(keyPath))
  }

  /// The child action inside `parent`, if any.
  @inlinable @inline(__always)
  func extract(_ parent: Parent) -> Child? {
    switch self.path {
    case .keyPath(let keyPath): return parent[keyPath: keyPath.value]
    case .casePath(let casePath): return casePath.extract(from: parent)
    }
  }

  /// Maps a child effect into the parent's actions, writing into `template` for a key path.
  @inlinable
  func embed(_ effect: Effect<Child>, template: Parent) -> Effect<Parent> {
    if case .none = effect.operation { return .none }
    switch self.path {
    case .keyPath(let keyPath):
      return effect.map { child in
        var parent = template
        parent[keyPath: keyPath.value] = child
        return parent
      }
    case .casePath(let casePath):
      return effect.map { casePath.embed($0) }
    }
  }
}

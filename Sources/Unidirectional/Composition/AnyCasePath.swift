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
  private let _embed: @Sendable (Value) -> Root
  private let _extract: @Sendable (Root) -> Value?

  /// Creates a case path from its two directions.
  public init(
    embed: @escaping @Sendable (Value) -> Root,
    extract: @escaping @Sendable (Root) -> Value?
  ) {
    self._embed = embed
    self._extract = extract
  }

  /// The root holding `value` in this case.
  public func embed(_ value: Value) -> Root {
    self._embed(value)
  }

  /// The value, when `root` is in this case.
  public func extract(from root: Root) -> Value? {
    self._extract(root)
  }
}

/// How a parent action carries a child action: extracts it, and embeds child actions (from the
/// child's effects, or sent to a scoped store) back into parent actions.
struct ActionEmbedding<Parent: Sendable, Child: Sendable>: Sendable {
  /// The child action inside `parent`, with a function that embeds others the same way.
  let extract: @Sendable (Parent) -> (child: Child, embed: @Sendable (Child) -> Parent)?
  /// Embeds without a parent action at hand (`nil` for a key path: it needs one to write into).
  let embedWithoutTemplate: (@Sendable (Child) -> Parent)?

  init(_ casePath: AnyCasePath<Parent, Child>) {
    self.extract = { parent in
      casePath.extract(from: parent).map { ($0, { casePath.embed($0) }) }
    }
    self.embedWithoutTemplate = { casePath.embed($0) }
  }

  init(_ keyPath: WritableKeyPath<Parent, Child?>) {
    let keyPath = SendableKeyPath(keyPath)
    self.extract = { parent in
      guard let child = parent[keyPath: keyPath.value] else { return nil }
      return (
        child,
        { child in
          var parent = parent
          parent[keyPath: keyPath.value] = child
          return parent
        }
      )
    }
    self.embedWithoutTemplate = nil
  }
}

/// A key path shared across tasks.
///
/// Safety: a key path is an immutable value; the ones this library receives are built from
/// stored and computed properties (the action key paths of `Scope`, `ifLet`, `forEach` and
/// `scope`) and capture no mutable state, so reading through one from any thread is safe.
struct SendableKeyPath<Root, Value>: @unchecked Sendable {
  let value: WritableKeyPath<Root, Value>

  init(_ value: WritableKeyPath<Root, Value>) {
    self.value = value
  }
}

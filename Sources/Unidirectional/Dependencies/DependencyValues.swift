/// The dependencies features read with ``Dependency``: clocks, generators, clients.
///
/// Dependencies are plain values (structs of closures, clocks, streams), so tests substitute
/// them. Register one by extending `DependencyValues` with a computed property backed by a
/// ``DependencyKey``:
///
/// ```swift
/// struct APIClient: Sendable {
///   var fetch: @Sendable (Int) async throws -> String
/// }
/// enum APIClientKey: DependencyKey {
///   static let liveValue = APIClient(fetch: { id in try await download(id) })
///   static let testValue = APIClient(fetch: { _ in try unimplemented("APIClient.fetch") })
/// }
/// extension DependencyValues {
///   var apiClient: APIClient {
///     get { self[APIClientKey.self] }
///     set { self[APIClientKey.self] = newValue }
///   }
/// }
/// ```
///
/// A store keeps the dependencies in force where it was created (plus its `withDependencies`
/// overrides); its reducer and every effect it returns see them. Under a test store the
/// ``DependencyKey/testValue``s are used.
public struct DependencyValues: Sendable {
  /// The overrides, each an `OverrideBox` of its key's value, under its key's identifier.
  private var storage: [ObjectIdentifier: any AnyObject & Sendable] = [:]

  /// Which default values unset dependencies take.
  public var context: DependencyContext = .live

  /// Where cancellation identifiers made now live: the `ifLet`/`forEach` child whose reducer is
  /// running (see ``CancelScope``).
  var cancelScope: CancelScope?

  /// Dependencies with nothing overridden, in the live context.
  public init() {}

  /// The dependencies in force for the current task (what a new store inherits).
  @usableFromInline
  static func _inherited() -> DependencyValues {
    DependencyValues.current
  }

  /// The dependencies in force: those of the store whose reducer is running on this thread, or
  /// else the current task's.
  package static var current: DependencyValues {
    if let box = ReducerDependencies.current { return box.values }
    return Self.$taskValues.get()
  }

  /// Runs `operation` with `values` in force (the store's initializer uses it to make the
  /// initial state and the reducer under the store's dependencies).
  @usableFromInline
  static func withValues<R>(_ values: DependencyValues, _ operation: () throws -> R) rethrows -> R {
    if ReducerDependencies.current != nil {
      return try ReducerDependencies.with(values, operation)
    }
    return try Self.$taskValues.withValue(values, operation: operation)
  }

  /// The dependencies bound to the current task (`withDependencies`, effect bodies).
  @TaskLocal static var taskValues = DependencyValues()

  /// Whether nothing is overridden, the context is live and no child scope is set (effects then
  /// skip binding them).
  @usableFromInline var isDefault: Bool {
    self.storage.isEmpty && self.context == .live && self.cancelScope == nil
  }

  /// The value of a dependency: the override if there is one, otherwise the key's default for
  /// the current ``context``.
  public subscript<Key: DependencyKey>(key: Key.Type) -> Key.Value {
    get {
      // NB: no `as? Key.Value`: a dynamic cast to a constrained existential such as
      // `any Clock<Duration>` checks its requirements by demangling them, every time, so a
      // reducer reading its clock paid many sends' worth for it. The setter is the only writer,
      // and it stores a box of `Key.Value` under `Key`'s identifier.
      if !self.storage.isEmpty, let stored = self.storage[ObjectIdentifier(key)] {
        return unsafeDowncast(stored, to: OverrideBox<Key.Value>.self).value
      }
      switch self.context {
      case .live: return Key.liveValue
      case .test: return Key.testValue
      }
    }
    set {
      self.storage[ObjectIdentifier(key)] = OverrideBox(newValue)
    }
  }

  /// Runs `operation` with these dependencies bound (a no-op binding when they are the
  /// defaults and nothing else is bound).
  @usableFromInline func bind<R>(
    isolation: isolated (any Actor)? = #isolation,
    _ operation: () async -> R
  ) async -> R {
    if self.isDefault, DependencyValues.current.isDefault {
      return await operation()
    }
    return await DependencyValues.$taskValues.withValue(self, operation: operation)
  }
}

/// Which default values unset dependencies take.
public enum DependencyContext: Sendable {
  /// ``DependencyKey/liveValue``: production.
  case live
  /// ``DependencyKey/testValue``: under a test store, or when a test sets it.
  case test
}

/// A key for a dependency in ``DependencyValues``.
public protocol DependencyKey {
  /// The dependency's type.
  associatedtype Value: Sendable

  /// The value used in production.
  static var liveValue: Value { get }

  /// The value used in tests; defaults to ``liveValue``. Make it fail when called (an
  /// "unimplemented" value) to prove which dependencies a flow uses.
  static var testValue: Value { get }
}

extension DependencyKey {
  /// The live value, unless the key provides a test value.
  public static var testValue: Value { Self.liveValue }
}

/// An overridden dependency's value, as ``DependencyValues`` stores it.
final class OverrideBox<Value: Sendable>: Sendable {
  let value: Value

  init(_ value: Value) {
    self.value = value
  }
}

/// Reads a dependency from the ``DependencyValues`` in force.
///
/// ```swift
/// struct Feature: Reducer {
///   @Dependency(\.continuousClock) var clock
///   @Dependency(\.uuid) var uuid
///   ...
/// }
/// ```
///
/// The value is read when the property is accessed: in a reducer, the store's dependencies; in
/// an effect, the dependencies in force when the reducer returned it.
@propertyWrapper
public struct Dependency<Value: Sendable>: Sendable {
  private let keyPath: any KeyPath<DependencyValues, Value> & Sendable

  /// Reads the dependency at `keyPath`.
  public init(_ keyPath: any KeyPath<DependencyValues, Value> & Sendable) {
    self.keyPath = keyPath
  }

  /// The dependency's current value.
  public var wrappedValue: Value {
    DependencyValues.current[keyPath: self.keyPath]
  }
}

/// Runs `operation` with dependencies changed by `update`, on top of the ones in force.
///
/// ```swift
/// let store = withDependencies {
///   $0.continuousClock = ImmediateClock()
/// } operation: {
///   Store(initialState: Feature.State()) { Feature() }
/// }
/// ```
public func withDependencies<R>(
  _ update: (inout DependencyValues) throws -> Void,
  operation: () throws -> R
) rethrows -> R {
  var dependencies = DependencyValues.current
  try update(&dependencies)
  if ReducerDependencies.current != nil {
    // Inside a running reducer: swap the thread's dependencies (a reducer never suspends).
    return try ReducerDependencies.with(dependencies, operation)
  }
  return try DependencyValues.$taskValues.withValue(dependencies, operation: operation)
}

/// Runs `operation` with dependencies changed by `update`, on top of the ones in force.
public func withDependencies<R>(
  isolation: isolated (any Actor)? = #isolation,
  _ update: (inout DependencyValues) throws -> Void,
  operation: () async throws -> R
) async rethrows -> R {
  var dependencies = DependencyValues.current
  try update(&dependencies)
  return try await DependencyValues.$taskValues.withValue(dependencies, operation: operation)
}

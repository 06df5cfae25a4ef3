// NB: public, so the inlinable store can install its dependencies with no call.
public import CUnidirectional

/// A store's dependencies, shared by reference so the store can install them cheaply.
@usableFromInline final class DependencyBox: Sendable {
  @usableFromInline let values: DependencyValues

  @usableFromInline init(_ values: DependencyValues) {
    self.values = values
  }

  /// The dependencies of a store created with nothing overridden.
  static let live = DependencyBox(DependencyValues())

  /// A box for `values`, sharing ``live`` when they are the defaults.
  @usableFromInline static func make(_ values: DependencyValues) -> DependencyBox {
    values.isDefault ? .live : DependencyBox(values)
  }
}

/// The dependencies in force for the reducer a store is running on this thread.
///
/// A store installs its dependencies around every reduce, so the reducer reads the store's
/// dependencies whatever the sending task has bound. A task-local would do the same at a cost
/// comparable to the send itself, `pthread_setspecific` at a call each way; a C `__thread`
/// variable (`CUnidirectional`) is one instruction. It is sound because a reduce is synchronous:
/// nothing else runs on the thread between installing and restoring, and nothing suspends.
@usableFromInline enum ReducerDependencies {
  /// The dependencies installed on this thread, if a reducer is running.
  static var current: DependencyBox? {
    guard let raw = cunidirectional_get_reducer_dependencies() else { return nil }
    return Unmanaged<DependencyBox>.fromOpaque(raw).takeUnretainedValue()
  }

  /// Installs the box `pointer` points to (kept alive by the caller until it restores);
  /// returns what to restore.
  @inlinable @inline(__always)
  static func install(_ pointer: UnsafeMutableRawPointer) -> UnsafeMutableRawPointer? {
    let previous = cunidirectional_get_reducer_dependencies()
    cunidirectional_set_reducer_dependencies(pointer)
    return previous
  }

  /// Restores what ``install(_:)`` returned.
  @inlinable @inline(__always)
  static func restore(_ previous: UnsafeMutableRawPointer?) {
    cunidirectional_set_reducer_dependencies(previous)
  }

  /// Runs `operation` with `values` installed (inside a running reducer).
  static func with<R, E: Error>(
    _ values: DependencyValues,
    _ operation: () throws(E) -> R
  ) throws(E) -> R {
    let box = DependencyBox(values)
    let previous = Self.install(Unmanaged.passUnretained(box).toOpaque())
    defer {
      Self.restore(previous)
      withExtendedLifetime(box) {}
    }
    return try operation()
  }
}

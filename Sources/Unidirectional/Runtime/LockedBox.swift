#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A `Sendable` value guarded by a lock: the one way the runtime shares mutable state between
/// threads.
///
/// ```swift
/// let counter = LockedBox(0)
/// counter.withLock { $0 += 1 }
/// ```
///
/// NB: a `pthread_mutex_t`, not `Synchronization.Mutex`: `Mutex` makes ThreadSanitizer report
/// false races on Linux (its contended path lives in an uninstrumented library), and pthread
/// mutexes are instrumented. The mutex lives in the same allocation as the value (the element of
/// a `ManagedBuffer`, whose address is stable): a separate allocation cost every store's
/// supervisor 48 B.
///
/// Safety: `value` is only read or written inside `withLock`, between `pthread_mutex_lock` and
/// `pthread_mutex_unlock` on the buffer's mutex, so no two threads ever access it at once; the
/// mutex is initialized with the buffer and destroyed with it. `Value: Sendable`, so what
/// `withLock` hands out or takes in may cross threads. The lock is not recursive: a body that
/// calls back into the same box deadlocks, so bodies never call out (no continuation is resumed
/// and no task is cancelled while it is held).
// Safety: the value is touched only under the mutex (see the paragraph above).
@usableFromInline
package struct LockedBox<Value: Sendable>: @unchecked Sendable {
  let storage: LockedBoxStorage<Value>

  package init(_ value: Value) {
    self.storage = LockedBoxStorage.make(value)
  }

  /// Runs `body` with exclusive access to the value.
  @inline(__always)
  package func withLock<R, E: Error>(_ body: (inout Value) throws(E) -> R) throws(E) -> R {
    try self.storage.withLock(body)
  }

  /// ``withLock(_:)`` for `@inlinable` code (specialized in the caller's module; the lock and
  /// unlock are calls).
  @inlinable
  func withLockInlined<R>(_ body: (inout Value) -> R) -> R {
    self.lock()
    defer { self.unlock() }
    return body(&self.value.pointee)
  }

  @usableFromInline func lock() {
    self.storage.lock()
  }

  @usableFromInline func unlock() {
    self.storage.unlock()
  }

  /// The value's address: stable for the buffer's life, which `storage` holds.
  @usableFromInline var value: UnsafeMutablePointer<Value> {
    self.storage.withUnsafeMutablePointerToHeader { $0 }
  }
}

/// The value (the header) and its mutex (the one element) of a ``LockedBox``, in one allocation.
final class LockedBoxStorage<Value: Sendable>: ManagedBuffer<Value, pthread_mutex_t> {
  static func make(_ value: Value) -> LockedBoxStorage {
    let buffer = self.create(minimumCapacity: 1) { _ in value }
    let storage = unsafeDowncast(buffer, to: LockedBoxStorage.self)
    storage.withUnsafeMutablePointerToElements { mutex in
      mutex.initialize(to: pthread_mutex_t())
      let status = pthread_mutex_init(mutex, nil)
      precondition(status == 0, "pthread_mutex_init failed: \(status)")
    }
    return storage
  }

  deinit {
    _ = self.withUnsafeMutablePointerToElements { pthread_mutex_destroy($0) }
  }

  @inline(__always)
  func withLock<R, E: Error>(_ body: (inout Value) throws(E) -> R) throws(E) -> R {
    self.lock()
    defer { self.unlock() }
    return try self.withUnsafeMutablePointerToHeader { header throws(E) -> R in
      try body(&header.pointee)
    }
  }

  func lock() {
    self.withUnsafeMutablePointerToElements { _ = pthread_mutex_lock($0) }
  }

  func unlock() {
    self.withUnsafeMutablePointerToElements { _ = pthread_mutex_unlock($0) }
  }
}

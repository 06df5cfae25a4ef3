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
/// NB: a heap-allocated `pthread_mutex_t`, not `Synchronization.Mutex`: `Mutex` makes
/// ThreadSanitizer report false races on Linux (its contended path lives in an uninstrumented
/// library), and pthread mutexes are instrumented.
///
/// Safety: `value` is only read or written inside `withLock`, between `pthread_mutex_lock` and
/// `pthread_mutex_unlock` on `mutex`, so no two threads ever access it at once; the mutex
/// pointer itself is immutable and valid for the object's lifetime. `Value: Sendable`, so what
/// `withLock` hands out or takes in may cross threads. The lock is not recursive: a body that
/// calls back into the same box deadlocks, so bodies never call out (no continuation is resumed
/// and no task is cancelled while it is held).
// Safety: `value` is touched only under `mutex` (see the paragraph above).
@usableFromInline
package final class LockedBox<Value: Sendable>: @unchecked Sendable {
  private let mutex: UnsafeMutablePointer<pthread_mutex_t>
  // Safety: as for the class: touched only under `mutex` (``withLockInlined(_:)`` locks it).
  @usableFromInline @exclusivity(unchecked) var value: Value

  package init(_ value: Value) {
    self.value = value
    self.mutex = .allocate(capacity: 1)
    self.mutex.initialize(to: pthread_mutex_t())
    let status = pthread_mutex_init(self.mutex, nil)
    precondition(status == 0, "pthread_mutex_init failed: \(status)")
  }

  deinit {
    pthread_mutex_destroy(self.mutex)
    self.mutex.deallocate()
  }

  /// Runs `body` with exclusive access to the value.
  @inline(__always)
  package func withLock<R, E: Error>(_ body: (inout Value) throws(E) -> R) throws(E) -> R {
    pthread_mutex_lock(self.mutex)
    defer { pthread_mutex_unlock(self.mutex) }
    return try body(&self.value)
  }

  /// ``withLock(_:)`` for `@inlinable` code (specialized in the caller's module; the lock and
  /// unlock are calls).
  @inlinable
  func withLockInlined<R>(_ body: (inout Value) -> R) -> R {
    self.lock()
    defer { self.unlock() }
    return body(&self.value)
  }

  @usableFromInline func lock() {
    pthread_mutex_lock(self.mutex)
  }

  @usableFromInline func unlock() {
    pthread_mutex_unlock(self.mutex)
  }
}

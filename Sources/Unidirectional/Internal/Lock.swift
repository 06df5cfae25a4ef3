#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The one internal lock: a heap-allocated `pthread_mutex_t`.
///
/// NB: `Synchronization.Mutex` makes ThreadSanitizer report false races on Linux (its contended
/// path lives in an uninstrumented library); pthread mutexes are instrumented and clean.
///
/// Safety: the mutex is only touched through pthread calls, which are thread-safe by contract,
/// and the pointer itself is immutable for the object's lifetime.
package final class Lock: @unchecked Sendable {
  private let mutex: UnsafeMutablePointer<pthread_mutex_t>

  package init() {
    self.mutex = .allocate(capacity: 1)
    self.mutex.initialize(to: pthread_mutex_t())
    let status = pthread_mutex_init(self.mutex, nil)
    precondition(status == 0, "pthread_mutex_init failed: \(status)")
  }

  deinit {
    pthread_mutex_destroy(self.mutex)
    self.mutex.deallocate()
  }

  package func lock() {
    let status = pthread_mutex_lock(self.mutex)
    assert(status == 0, "pthread_mutex_lock failed: \(status)")
  }

  package func unlock() {
    let status = pthread_mutex_unlock(self.mutex)
    assert(status == 0, "pthread_mutex_unlock failed: \(status)")
  }

  @inline(__always)
  package func withLock<R, E: Error>(_ body: () throws(E) -> R) throws(E) -> R {
    self.lock()
    defer { self.unlock() }
    return try body()
  }
}

/// A value protected by a ``Lock``, in one allocation.
///
/// Safety: `value` is only read or written inside `withLock`, which holds `lock`.
package final class LockedValue<Value>: @unchecked Sendable {
  private let lock = Lock()
  private var value: Value

  package init(_ value: Value) {
    self.value = value
  }

  @inline(__always)
  package func withLock<R, E: Error>(_ body: (inout Value) throws(E) -> R) throws(E) -> R {
    self.lock.lock()
    defer { self.lock.unlock() }
    return try body(&self.value)
  }
}

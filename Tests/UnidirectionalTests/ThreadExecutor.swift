import Dispatch
import Foundation
import Synchronization

/// A task executor with one thread of its own, off the cooperative pool.
///
/// For a test that explores for many seconds without suspending: on the pool it holds one of the
/// pool's threads (two on a two-core machine) for all that time, and with another test's effect
/// spinning on the other, every other test in the run waits.
final class ThreadExecutor: TaskExecutor, Sendable {
  private let jobs = Mutex<[UnownedJob]>([])
  private let available = DispatchSemaphore(value: 0)

  /// An executor whose thread, named `name`, lives as long as the test process.
  init(name: String) {
    let thread = Thread { [self] in
      while true {
        self.available.wait()
        guard let job = self.jobs.withLock({ $0.isEmpty ? nil : $0.removeFirst() }) else {
          continue
        }
        job.runSynchronously(on: self.asUnownedTaskExecutor())
      }
    }
    thread.name = name
    thread.start()
  }

  func enqueue(_ job: consuming ExecutorJob) {
    let job = UnownedJob(job)
    self.jobs.withLock { $0.append(job) }
    self.available.signal()
  }
}

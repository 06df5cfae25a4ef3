import CUnidirectionalTesting
import Unidirectional

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Not API: a serial and task executor whose jobs run only when a test drains it by hand.
///
/// A task that prefers this executor (SE-0417) runs every job on it: its structured children, the
/// default actors it calls (a ``Store`` included), and the continuations others resume for it (a
/// ``TestClock`` sleeper). Draining runs the jobs one at a time, in the order they were enqueued,
/// on the draining thread, so a scenario has exactly one interleaving.
///
/// > Important: Task executor preferences are held unowned by the runtime. Keep the executor
/// > alive while any task may still enqueue on it; the stores, tasks and sleepers that use it
/// > hold it strongly for that reason.
package final class ManualExecutor: SerialExecutor, TaskExecutor, ManualDrainer, Sendable {
  private struct Queue: Sendable {
    var jobs: [UnownedJob] = []
    var head = 0
    var drainingThread: pthread_t?
    var arrivalWaiters: [UnsafeContinuation<Void, Never>] = []
    var jobsRun = 0
    /// Set by ``wakeJobWaiters()``: later waits return at once until ``resetWaitTimeout()``.
    var waitTimedOut = false
    /// Tasks suspended in ``settle()`` from one of this executor's jobs, resumed one at a time when
    /// nothing else is left to run.
    var settlers: [UnsafeContinuation<Void, Never>] = []
    /// Once the scope that owned the executor has ended, jobs go to the global executor.
    var forwardsJobs = false
    /// Whether the drain runs the newest ready job first (see ``runsNewestJobFirst``).
    var newestFirst = false

    var pendingCount: Int { self.jobs.count - self.head }

    mutating func popFirst() -> UnownedJob? {
      guard self.head < self.jobs.count else { return nil }
      let job: UnownedJob
      if self.newestFirst {
        job = self.jobs.removeLast()
      } else {
        job = self.jobs[self.head]
        self.head += 1
      }
      if self.head == self.jobs.count {
        self.jobs.removeAll(keepingCapacity: true)
        self.head = 0
      }
      self.jobsRun += 1
      return job
    }
  }

  private let queue = LockedBox(Queue())
  /// Whether jobs a draining thread hands to the global executor come here instead (see
  /// `withTestExecution`).
  private let capturesTasks: Bool

  package init(capturesTasks: Bool = false) {
    self.capturesTasks = capturesTasks
    if capturesTasks {
      cunidirectionaltesting_install_enqueue_hook { context, job in
        let executor = Unmanaged<ManualExecutor>.fromOpaque(context).takeUnretainedValue()
        // Safety: the runtime hands the hook a `Job *`, which `UnownedJob` wraps as its only
        // stored property; the job is run once, by the drain or by the global executor.
        executor.append(unsafeBitCast(job, to: UnownedJob.self))
      }
    }
  }

  package func enqueue(_ job: consuming ExecutorJob) {
    self.append(UnownedJob(job))
  }

  private func append(_ job: UnownedJob) {
    let (waiters, forward) = self.queue.withLock { queue in
      if queue.forwardsJobs { return ([UnsafeContinuation<Void, Never>](), true) }
      queue.jobs.append(job)
      defer { queue.arrivalWaiters = [] }
      return (queue.arrivalWaiters, false)
    }
    if forward {
      globalConcurrentExecutor.enqueue(job)
      return
    }
    for waiter in waiters { waiter.resume() }
  }

  /// Lets every other job run until none is left (see ``ManualDrainer/settle()``).
  package func settle() async {
    guard self.isDrainingOnCurrentThread else {
      self.drainUntilIdle()
      return
    }
    await withUnsafeContinuation { continuation in
      self.queue.withLock { $0.settlers.append(continuation) }
    }
  }

  /// Ends the executor's scope: the jobs still queued, and any enqueued later, go to the global
  /// executor, so nothing is stranded on an executor nobody drains.
  package func forwardJobs() {
    let stranded = self.queue.withLock { queue -> [UnownedJob] in
      queue.forwardsJobs = true
      defer {
        queue.jobs = []
        queue.head = 0
      }
      return Array(queue.jobs[queue.head...])
    }
    for job in stranded { globalConcurrentExecutor.enqueue(job) }
  }

  package func asUnownedSerialExecutor() -> UnownedSerialExecutor {
    UnownedSerialExecutor(ordinary: self)
  }

  package func isIsolatingCurrentContext() -> Bool? {
    self.isDrainingOnCurrentThread
  }

  package func checkIsolated() {
    precondition(self.isDrainingOnCurrentThread, "Not running on the test store's executor.")
  }

  /// Whether a drain is running on the calling thread.
  package var isDrainingOnCurrentThread: Bool {
    self.queue.withLock { queue in
      guard let thread = queue.drainingThread else { return false }
      return pthread_equal(thread, pthread_self()) != 0
    }
  }

  /// Whether draining runs the newest ready job first instead of the oldest.
  ///
  /// Still one interleaving per run, but the opposite of the usual one wherever jobs are ready
  /// together: work that only happened to come out in order (two concurrent effects) comes out
  /// reversed, which exposes a test's wrong assumption of order.
  package var runsNewestJobFirst: Bool {
    get { self.queue.withLock { $0.newestFirst } }
    set { self.queue.withLock { $0.newestFirst = newValue } }
  }

  /// The number of jobs waiting to run.
  package var pendingJobCount: Int {
    self.queue.withLock { $0.pendingCount }
  }

  /// The number of jobs run so far.
  package var jobsRun: Int {
    self.queue.withLock { $0.jobsRun }
  }

  /// Runs jobs, in order, until none is left (including jobs enqueued by the jobs it runs).
  ///
  /// A call from inside one of this executor's own jobs returns at once: the outer drain runs
  /// whatever that job enqueued.
  package func drainUntilIdle() {
    let start = self.queue.withLock { queue -> Bool? in
      if let thread = queue.drainingThread {
        return pthread_equal(thread, pthread_self()) != 0 ? false : nil
      }
      queue.drainingThread = pthread_self()
      return true
    }
    guard let start else {
      preconditionFailure("ManualExecutor drained from two threads at once.")
    }
    guard start else { return }
    let previousContext =
      self.capturesTasks
      ? cunidirectionaltesting_set_capturing_context(Unmanaged.passUnretained(self).toOpaque())
      : nil
    while true {
      let next = self.queue.withLock { queue -> (UnownedJob?, UnsafeContinuation<Void, Never>?) in
        if let job = queue.popFirst() { return (job, nil) }
        if !queue.settlers.isEmpty { return (nil, queue.settlers.removeFirst()) }
        return (nil, nil)
      }
      if let job = next.0 {
        job.runSynchronously(
          isolatedTo: self.asUnownedSerialExecutor(),
          taskExecutor: self.asUnownedTaskExecutor()
        )
      } else if let settler = next.1 {
        settler.resume()  // enqueues its job here
      } else {
        break
      }
    }
    if self.capturesTasks {
      _ = cunidirectionaltesting_set_capturing_context(previousContext)
    }
    self.queue.withLock { $0.drainingThread = nil }
  }

  /// Runs the pending job at `offset` (0 is the oldest) on the calling thread, out of order: for
  /// tests that explore every order in which ready jobs could run.
  package func runPendingJob(at offset: Int) {
    let job = self.queue.withLock { queue -> UnownedJob in
      precondition(queue.drainingThread == nil, "runPendingJob(at:) called during a drain.")
      precondition(offset < queue.pendingCount, "No pending job at \(offset).")
      queue.drainingThread = pthread_self()
      queue.jobsRun += 1
      return queue.jobs.remove(at: queue.head + offset)
    }
    job.runSynchronously(
      isolatedTo: self.asUnownedSerialExecutor(),
      taskExecutor: self.asUnownedTaskExecutor()
    )
    self.queue.withLock { $0.drainingThread = nil }
  }

  /// Suspends until a job is enqueued (returns at once if one is waiting).
  ///
  /// Used when a test waits on work the executor cannot see (a real socket, `Task.detached`): that
  /// work finishes by resuming a task of ours, which enqueues a job here.
  package func waitForJob() async {
    // NB: the lock is never held across the suspension point.
    await withUnsafeContinuation { continuation in
      let resumeNow = self.queue.withLock { queue -> Bool in
        if queue.pendingCount > 0 || queue.waitTimedOut { return true }
        queue.arrivalWaiters.append(continuation)
        return false
      }
      if resumeNow { continuation.resume() }
    }
  }

  /// Resumes every task suspended in ``waitForJob()``, and makes later calls return at once until
  /// ``resetWaitTimeout()`` (used when a wait times out).
  package func wakeJobWaiters() {
    let waiters = self.queue.withLock { queue in
      queue.waitTimedOut = true
      defer { queue.arrivalWaiters = [] }
      return queue.arrivalWaiters
    }
    for waiter in waiters { waiter.resume() }
  }

  /// Lets ``waitForJob()`` suspend again after ``wakeJobWaiters()``.
  package func resetWaitTimeout() {
    self.queue.withLock { $0.waitTimedOut = false }
  }

  /// Drains, and whenever work outside this executor enqueues a job, drains again, until `isDone`
  /// holds, `shouldStop` holds, or `timeout` has passed.
  ///
  /// Returns `isDone()`.
  ///
  /// This is the one place the test tools wait on real time: a bounded wait for work the executor
  /// cannot see (a real clock, a socket, `Task.detached`). Effects that only use injected clocks,
  /// streams and actors never get here.
  package func drain(
    waitingAtMost timeout: Duration,
    until isDone: () -> Bool,
    orStopWhen shouldStop: () -> Bool = { false }
  ) async -> Bool {
    self.drainUntilIdle()
    if isDone() { return true }
    guard timeout > .zero, !shouldStop() else { return false }
    self.resetWaitTimeout()
    let timer = Task.detached { [self] in
      try? await Task.sleep(for: timeout)
      self.wakeJobWaiters()
    }
    defer { timer.cancel() }
    let clock = ContinuousClock()
    let deadline = clock.now.advanced(by: timeout)
    while clock.now < deadline {
      await self.waitForJob()
      self.drainUntilIdle()
      if isDone() { return true }
      if shouldStop() { return false }
    }
    return isDone()
  }

  /// Runs `operation` in a task that prefers this executor, draining until it has returned.
  ///
  /// The task also carries this executor as ``TestExecution/drainer``, so test clocks drain it
  /// after waking its sleepers. When the operation waits on work outside the executor, this waits
  /// for that work to enqueue a job, then drains again.
  @discardableResult
  package func perform<T: Sendable>(
    _ operation: @escaping @Sendable () async -> T
  ) async -> T {
    let result = LockIsolated<Returned<T>?>(nil)
    let task = Task(executorPreference: self) {
      await TestExecution.$drainer.withValue(self) {
        result.setValue(Returned(value: await operation()))
      }
    }
    self.drainUntilIdle()
    while true {
      if let returned = result.value {
        await task.value
        return returned.value
      }
      await self.waitForJob()
      self.drainUntilIdle()
    }
  }
}

/// A returned value (distinguishes a returned `nil` from "not returned yet").
private struct Returned<T: Sendable>: Sendable {
  let value: T
}

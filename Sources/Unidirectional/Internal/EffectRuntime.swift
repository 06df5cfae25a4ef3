import Synchronization

/// The effect bookkeeping of one root store (or of one standalone iteration of an effect).
///
/// It owns the *root task*: one task, started with the first asynchronous effect, that runs a
/// discarding task group. Every effect runs as a child of that group; the store hands jobs over
/// through a mailbox (`pending` plus one parked continuation), in batches. Shutting the runtime
/// down cancels the root task, which cancels every effect structurally.
///
/// All mutable state is guarded by one pthread lock. Nothing here is isolated to the store, so
/// effects finish, and `StoreTask.cancel()` works, without hopping to it.
///
/// Safety: every `var` is read and written only while `lock` is held. The lock also rules out
/// overlapping accesses, so the fields skip dynamic exclusivity checks.
@usableFromInline final class EffectRuntime: @unchecked Sendable {
  private let lock = Lock()
  @exclusivity(unchecked) private var registry = CancellationRegistry()
  /// Throttle ids: when each last let an effect run (see `Effect.throttle`).
  @exclusivity(unchecked) private var throttles: [CancelKey: ThrottleState] = [:]
  @exclusivity(unchecked) private var liveCount = 0
  /// Tasks waiting for `liveCount` to reach 0 (graceful shutdown), by token.
  @exclusivity(unchecked) private var idleWaiters: [Int: UnsafeContinuation<Void, Never>] = [:]
  @exclusivity(unchecked) private var nextIdleToken = 0
  @exclusivity(unchecked) private var pending: [EffectJob] = []
  @exclusivity(unchecked) private var rootWaiter: UnsafeContinuation<Void, Never>?
  @exclusivity(unchecked) private var phase = Phase.idle
  @exclusivity(unchecked) private var rootTask: Task<Void, Never>?
  /// Lifetimes with unfinished effects, kept only for test harnesses (`tracksLifetimes`).
  @exclusivity(unchecked) private var liveLifetimes: [ObjectIdentifier: EffectLifetime] = [:]
  /// Whether `liveLifetimes` is maintained.
  private let tracksLifetimes: Bool

  private let executorPreference: (any TaskExecutor)?
  private let reporter: IssueReporter
  private let dependencies: DependencyValues

  private enum Phase {
    /// No effect has started yet; there is no root task.
    case idle
    /// The root task is running (or about to).
    case running
    /// Shut down: new jobs are abandoned, deliveries are dropped.
    case shutDown
  }

  /// The runtime running the current effect, for `withTaskCancellation(id:)`.
  @TaskLocal static var current: EffectRuntime?

  init(
    executorPreference: (any TaskExecutor)?,
    reporter: IssueReporter,
    dependencies: DependencyValues,
    tracksLifetimes: Bool = false
  ) {
    self.tracksLifetimes = tracksLifetimes
    self.executorPreference = executorPreference
    self.reporter = reporter
    self.dependencies = dependencies
  }

  // MARK: - Registering effects

  /// Creates the box of one unit of asynchronous work and registers it under `keys` and in
  /// `lifetime`. A box joining a cancelled lifetime, or a shut-down runtime, is born cancelled.
  func makeBox(keys: [CancelKey], lifetime: EffectLifetime) -> EffectBox {
    let box = EffectBox(keys: keys, lifetime: lifetime)
    self.lock.withLock {
      self.liveCount += 1
      if self.tracksLifetimes && lifetime.hasNoBoxes {
        self.liveLifetimes[ObjectIdentifier(lifetime)] = lifetime
      }
      lifetime.insert(box)
      if !keys.isEmpty {
        self.registry.register(box, under: keys)
      }
      if lifetime.isCancelled || self.phase == .shutDown {
        box.markCancelled()
      }
    }
    return box
  }

  /// Hands jobs to the root task, starting it on first use. Empties `jobs`, keeping capacity.
  @usableFromInline
  func submit(_ jobs: inout [EffectJob]) {
    guard !jobs.isEmpty else { return }
    self.lock.lock()
    if self.phase == .shutDown {
      self.lock.unlock()
      for job in jobs { job.abandon() }
      jobs.removeAll(keepingCapacity: true)
      return
    }
    self.pending.append(contentsOf: jobs)
    jobs.removeAll(keepingCapacity: true)
    let waiter = self.rootWaiter
    self.rootWaiter = nil
    if self.phase == .idle {
      self.phase = .running
      self.rootTask = self.makeRootTask()
    }
    self.lock.unlock()
    waiter?.resume()
  }

  // MARK: - The root task

  private func makeRootTask() -> Task<Void, Never> {
    Task(executorPreference: self.executorPreference, priority: .medium) {
      await IssueReporter.$current.withValue(self.reporter) {
        await DependencyValues.$current.withValue(self.dependencies) {
          await EffectRuntime.$current.withValue(self) {
            await self.runRoot()
          }
        }
      }
    }
  }

  /// How many effects run directly in the root group before new ones go to shards.
  static let directChildren = 64
  /// How many effects a shard takes before the next one opens.
  static let shardCapacity = 64

  /// Runs jobs as children of the root group while few are live; past that, in *shards*:
  /// child tasks of the root that each run a group of at most `shardCapacity` effects.
  ///
  /// NB: the runtime unlinks a finished child from its group by walking the group's child
  /// list, so with every effect in one group, ending an effect cost O(live effects) (41% of a
  /// `cancel(id:)` with 10,000 effects live). Shards keep every group short.
  private func runRoot() async {
    let directLive = AtomicCounter()
    await withDiscardingTaskGroup { group in
      var batch: [EffectJob] = []
      var shard: EffectShard?
      var shardCount = 0
      while await self.nextBatch(into: &batch) {
        for job in batch {
          if directLive.value.load(ordering: .relaxed) < Self.directChildren {
            directLive.value.add(1, ordering: .relaxed)
            group.addTask(priority: job.priority) {
              await job.run()
              directLive.value.subtract(1, ordering: .relaxed)
            }
            continue
          }
          if shard == nil || shardCount == Self.shardCapacity {
            shard?.seal()
            let next = EffectShard()
            shard = next
            shardCount = 0
            group.addTask { await next.run() }
          }
          shard?.submit(job)
          shardCount += 1
        }
        batch.removeAll(keepingCapacity: true)
      }
      shard?.seal()
    }
  }

  /// Swaps pending jobs into `batch`, parking until there are some; `false` once shut down.
  private func nextBatch(into batch: inout [EffectJob]) async -> Bool {
    while true {
      self.lock.lock()
      if !self.pending.isEmpty {
        swap(&batch, &self.pending)
        self.lock.unlock()
        return true
      }
      if self.phase == .shutDown {
        self.lock.unlock()
        return false
      }
      self.lock.unlock()
      // NB: the lock is never held across a suspension point: a resumed task may continue on
      // another thread (or, on a hand-drained executor, the same thread in a later job).
      await withUnsafeContinuation { continuation in
        self.lock.lock()
        if self.pending.isEmpty && self.phase != .shutDown {
          self.rootWaiter = continuation
          self.lock.unlock()
        } else {
          self.lock.unlock()
          continuation.resume()
        }
      }
    }
  }

  // MARK: - Running and finishing

  /// Called by the task about to run `box`'s work; `false` (and the box is finished) when it was
  /// cancelled first.
  func start(_ box: EffectBox) -> Bool {
    withUnsafeCurrentTask { task in
      self.lock.lock()
      guard let task, !box.isCancelled, self.phase != .shutDown else {
        let waiters = self.finishLocked(box)
        self.lock.unlock()
        waiters.resumeAll()
        return false
      }
      box.phase = .running(task)
      self.lock.unlock()
      return true
    }
  }

  /// Called by the task that ran `box`'s work, after it returned.
  func finish(_ box: EffectBox) async {
    self.lock.lock()
    if box.cancelsInProgress > 0 {
      self.lock.unlock()
      // NB: another thread is about to call `cancel()` on this task; keep the task alive until
      // it is done (see `cancelTasks(_:)`).
      await withUnsafeContinuation { continuation in
        self.lock.lock()
        if box.cancelsInProgress > 0 {
          box.finishWaiter = continuation
          self.lock.unlock()
        } else {
          self.lock.unlock()
          continuation.resume()
        }
      }
      self.lock.lock()
    }
    let waiters = self.finishLocked(box)
    self.lock.unlock()
    waiters.resumeAll()
  }

  /// Finishes a box whose synchronous work (a cancellable `.send`) was done on the store.
  @usableFromInline
  func complete(_ box: EffectBox) {
    self.lock.lock()
    let waiters = self.finishLocked(box)
    self.lock.unlock()
    waiters.resumeAll()
  }

  /// Finishes a box whose work never started (its job was abandoned).
  @usableFromInline
  func abandon(_ box: EffectBox) {
    self.lock.lock()
    box.markCancelled()
    let waiters = self.finishLocked(box)
    self.lock.unlock()
    waiters.resumeAll()
  }

  private func finishLocked(_ box: EffectBox) -> Waiters {
    var waiters = Waiters()
    if case .finished = box.phase { return waiters }
    box.phase = .finished
    self.liveCount -= 1
    if self.liveCount == 0 && !self.idleWaiters.isEmpty {
      waiters.others += self.idleWaiters.values
      self.idleWaiters = [:]
    }
    if !box.keys.isEmpty {
      self.registry.remove(box, from: box.keys)
    }
    let lifetime = box.lifetime
    lifetime.remove(box)
    guard lifetime.hasNoBoxes else { return waiters }
    if self.tracksLifetimes {
      self.liveLifetimes.removeValue(forKey: ObjectIdentifier(lifetime))
    }
    waiters.first = lifetime.waiter
    lifetime.waiter = nil
    if !lifetime.waiters.isEmpty {
      waiters.others += lifetime.waiters
      lifetime.waiters = []
    }
    return waiters
  }


  // MARK: - Cancelling

  /// Cancels every effect registered under any of `keys`. Unknown keys are a no-op.
  func cancel(_ keys: [CancelKey]) {
    var tasks: [(EffectBox, UnsafeCurrentTask)] = []
    self.lock.lock()
    for key in keys {
      guard let boxes = self.registry.boxes(for: key) else { continue }
      for box in boxes {
        Self.markCancelledLocked(box, collecting: &tasks)
      }
    }
    self.lock.unlock()
    self.cancelTasks(tasks)
  }

  /// Cancels every unfinished effect of a lifetime, and any that joins it later.
  func cancel(_ lifetime: EffectLifetime) {
    var tasks: [(EffectBox, UnsafeCurrentTask)] = []
    self.lock.lock()
    lifetime.isCancelled = true
    for box in lifetime.allBoxes {
      Self.markCancelledLocked(box, collecting: &tasks)
    }
    self.lock.unlock()
    self.cancelTasks(tasks)
  }

  private static func markCancelledLocked(
    _ box: EffectBox,
    collecting tasks: inout [(EffectBox, UnsafeCurrentTask)]
  ) {
    guard !box.isCancelled else { return }
    box.markCancelled()
    if case .running(let task) = box.phase {
      box.cancelsInProgress += 1
      tasks.append((box, task))
    }
  }

  /// Cancels the tasks outside the lock (cancellation handlers run synchronously and may take
  /// other locks, including this one), then releases the pins taken under it.
  private func cancelTasks(_ tasks: [(EffectBox, UnsafeCurrentTask)]) {
    guard !tasks.isEmpty else { return }
    for (_, task) in tasks {
      task.cancel()
    }
    var waiters: [UnsafeContinuation<Void, Never>] = []
    self.lock.lock()
    for (box, _) in tasks {
      box.cancelsInProgress -= 1
      if box.cancelsInProgress == 0, let waiter = box.finishWaiter {
        box.finishWaiter = nil
        waiters.append(waiter)
      }
    }
    self.lock.unlock()
    for waiter in waiters { waiter.resume() }
  }

  // MARK: - Waiting

  /// Suspends until every effect of `lifetime` has finished.
  func wait(for lifetime: EffectLifetime) async {
    if self.isFinished(lifetime) { return }
    await withUnsafeContinuation { continuation in
      self.lock.lock()
      if lifetime.hasNoBoxes {
        self.lock.unlock()
        continuation.resume()
      } else {
        if lifetime.waiter == nil {
          lifetime.waiter = continuation
        } else {
          lifetime.waiters.append(continuation)
        }
        self.lock.unlock()
      }
    }
  }

  func isFinished(_ lifetime: EffectLifetime) -> Bool {
    self.lock.withLock { lifetime.hasNoBoxes }
  }

  func isCancelled(_ lifetime: EffectLifetime) -> Bool {
    self.lock.withLock { lifetime.isCancelled }
  }

  // MARK: - Shutting down

  /// Stops accepting jobs, abandons the ones not started, cancels the root task (and so every
  /// effect) and returns it so the caller can wait for it to end.
  @discardableResult
  func shutdown() -> Task<Void, Never>? {
    self.lock.lock()
    self.phase = .shutDown
    let abandoned = self.pending
    self.pending = []
    let waiter = self.rootWaiter
    self.rootWaiter = nil
    let root = self.rootTask
    self.lock.unlock()
    for job in abandoned { job.abandon() }
    root?.cancel()
    waiter?.resume()
    return root
  }

  var isShutDown: Bool {
    self.lock.withLock { self.phase == .shutDown }
  }

  /// Suspends until no effect is live, or the waiting task is cancelled.
  func waitUntilIdle() async {
    let token = self.lock.withLock { () -> Int in
      defer { self.nextIdleToken += 1 }
      return self.nextIdleToken
    }
    await withTaskCancellationHandler {
      await withUnsafeContinuation { (continuation: UnsafeContinuation<Void, Never>) in
        self.lock.lock()
        if self.liveCount == 0 || Task.isCancelled {
          self.lock.unlock()
          continuation.resume()
        } else {
          self.idleWaiters[token] = continuation
          self.lock.unlock()
        }
      }
    } onCancel: {
      let waiter = self.lock.withLock { self.idleWaiters.removeValue(forKey: token) }
      waiter?.resume()
    }
  }

  // MARK: - Throttling

  /// Reads and updates the throttle state of `key` (created by `body` on first use).
  func withThrottleState<R>(for key: CancelKey, _ body: (inout ThrottleState) -> R) -> R {
    self.lock.withLock {
      var state = self.throttles[key] ?? ThrottleState(lastRun: (), isHolding: false)
      defer { self.throttles[key] = state }
      return body(&state)
    }
  }

  // MARK: - Introspection (tests and benchmarks)

  /// Effects registered and not finished.
  package var liveEffectCount: Int {
    self.lock.withLock { self.liveCount }
  }

  /// Identifiers with at least one registered, unfinished effect.
  package var registeredIdentifierCount: Int {
    self.lock.withLock { self.registry.count }
  }

  /// The origins of the lifetimes that still have unfinished effects.
  func unfinishedEffectCount(under key: CancelKey) -> Int {
    self.lock.withLock { self.registry.count(for: key) }
  }

  /// The origins of the lifetimes with unfinished effects, in the order they were sent
  /// (requires `tracksLifetimes`).
  package func unfinishedOrigins() -> [EffectOrigin] {
    self.lock.withLock {
      self.liveLifetimes.values.compactMap(\.origin).sorted { $0.sequence < $1.sequence }
    }
  }

  /// Cancels every unfinished effect without shutting down (requires `tracksLifetimes`).
  package func cancelAllEffects() {
    let lifetimes = self.lock.withLock { Array(self.liveLifetimes.values) }
    for lifetime in lifetimes { self.cancel(lifetime) }
  }

  /// Records the action that started a lifetime, for test diagnostics.
  func setOrigin(_ origin: EffectOrigin, of lifetime: EffectLifetime) {
    self.lock.withLock { lifetime.origin = origin }
  }

  func origin(of lifetime: EffectLifetime) -> EffectOrigin? {
    self.lock.withLock { lifetime.origin }
  }
}

/// A group of at most `EffectRuntime.shardCapacity` effects, fed by the root task through a
/// mailbox; it ends once sealed and its effects have ended.
///
/// Safety: every `var` is read and written only while `lock` is held.
final class EffectShard: @unchecked Sendable {
  private let lock = Lock()
  @exclusivity(unchecked) private var pending: [EffectJob] = []
  @exclusivity(unchecked) private var waiter: UnsafeContinuation<Void, Never>?
  @exclusivity(unchecked) private var isSealed = false

  func submit(_ job: EffectJob) {
    self.lock.lock()
    self.pending.append(job)
    let waiter = self.waiter
    self.waiter = nil
    self.lock.unlock()
    waiter?.resume()
  }

  /// No more jobs will come.
  func seal() {
    self.lock.lock()
    self.isSealed = true
    let waiter = self.waiter
    self.waiter = nil
    self.lock.unlock()
    waiter?.resume()
  }

  func run() async {
    await withDiscardingTaskGroup { group in
      var batch: [EffectJob] = []
      while await self.next(into: &batch) {
        for job in batch {
          group.addTask(priority: job.priority) { await job.run() }
        }
        batch.removeAll(keepingCapacity: true)
      }
    }
  }

  private func next(into batch: inout [EffectJob]) async -> Bool {
    while true {
      self.lock.lock()
      if !self.pending.isEmpty {
        swap(&batch, &self.pending)
        self.lock.unlock()
        return true
      }
      if self.isSealed {
        self.lock.unlock()
        return false
      }
      self.lock.unlock()
      await withUnsafeContinuation { continuation in
        self.lock.lock()
        if self.pending.isEmpty && !self.isSealed {
          self.waiter = continuation
          self.lock.unlock()
        } else {
          self.lock.unlock()
          continuation.resume()
        }
      }
    }
  }
}

/// An atomic integer that closures can share.
final class AtomicCounter: Sendable {
  let value = Atomic<Int>(0)
}

/// Tasks to resume once the lock is released: usually one (kept inline, no allocation).
struct Waiters {
  var first: UnsafeContinuation<Void, Never>?
  var others: [UnsafeContinuation<Void, Never>] = []

  func resumeAll() {
    self.first?.resume()
    for waiter in self.others { waiter.resume() }
  }
}

import Synchronization

/// Runs the effects of one root store: the thin executor around an ``EffectStateMachine``.
///
/// It owns the lock that guards the machine, the *root task* (started with the first asynchronous
/// effect; it runs a discarding task group, and every effect is a structured child of it) and
/// performs what the machine's transitions return: resuming waiters, cancelling tasks, starting or
/// waking the root task. Nothing here is isolated to the store, so effects finish, and
/// `StoreTask.cancel()` works, without hopping to it.
///
/// Shutting down cancels the root task, which cancels every effect structurally; the task's last
/// step runs `rootTaskEnded` (the store uses it to let go of its state).
@usableFromInline final class EffectSupervisor: Sendable {
  typealias Machine = EffectStateMachine<any EffectJob, UnsafeContinuation<Void, Never>, TaskSlot>

  private struct Guarded: Sendable {
    var machine = Machine()
    var rootTask: Task<Void, Never>?
    /// Errors effects threw, until they end (only with an observer).
    var failures: [EffectID: any Error] = [:]
  }

  private let guarded = LockedBox(Guarded())
  private let executorPreference: (any TaskExecutor)?
  private let reporter: IssueReporter
  private let rootTaskEnded: @Sendable () async -> Void
  /// The store's observer: effect events.
  let observer: (any StoreObserver)?
  /// Effects running directly in the root group (see `runRootTask`).
  private let directChildren = Atomic<Int>(0)

  /// The supervisor of the effect the current task runs, for `withTaskCancellation(id:)`.
  @TaskLocal static var current: EffectSupervisor?

  init(
    executorPreference: (any TaskExecutor)?,
    reporter: IssueReporter,
    observer: (any StoreObserver)? = nil,
    rootTaskEnded: @escaping @Sendable () async -> Void = {}
  ) {
    self.executorPreference = executorPreference
    self.reporter = reporter
    self.observer = observer
    self.rootTaskEnded = rootTaskEnded
  }

  // MARK: - Registering and submitting

  /// Registers the units a reducer returned and cancels what it asked to cancel, in order, then
  /// hands the jobs to the root task.
  ///
  /// Empties both arrays, keeping their capacity.
  @usableFromInline
  func apply(_ steps: inout [PlanStep], jobs: inout [any EffectJob]) {
    var cancellation = Machine.Cancellation()
    let submission = self.guarded.withLock { guarded -> Machine.Submission? in
      for step in steps {
        switch step {
        case .register(let unit, let keys):
          guarded.machine.register(unit, keys: keys)
        case .cancel(let keys):
          let more = guarded.machine.cancel(keys)
          cancellation.tasks += more.tasks
          cancellation.resumptions.append(contentsOf: more.resumptions)
        }
      }
      guard !jobs.isEmpty else { return nil }
      let submission = guarded.machine.submit(&jobs)
      if case .startRootTask = submission {
        guarded.rootTask = self.makeRootTask()
      }
      return submission
    }
    steps.removeAll(keepingCapacity: true)
    self.perform(cancellation)
    switch submission {
    case .resume(let rootTask): rootTask.resume()
    case .abandon(let abandoned): for job in abandoned { job.abandon(on: self) }
    case .posted, .startRootTask, nil: break
    }
  }

  /// Records what started a lifetime (test diagnostics).
  func setOrigin(_ origin: EffectOrigin, of lifetime: any EffectUnit) {
    self.guarded.withLock { $0.machine.setOrigin(origin, of: lifetime) }
  }

  // MARK: - The root task

  private func makeRootTask() -> Task<Void, Never> {
    // NB: detached: the root task must not inherit the task-locals of whichever task happened
    // to send the first action (its dependency overrides, say). It binds what effects need.
    guard let executorPreference = self.executorPreference else {
      // NB: no preference at all, not a `nil` one: a task created with one (even `nil`) carries
      // a preference record that every hop of every effect looks up (measured: 16% of an
      // effect's delivery).
      return Task.detached(priority: .medium) { await self.rootTaskBody() }
    }
    return Task.detached(executorPreference: executorPreference, priority: .medium) {
      await self.rootTaskBody()
    }
  }

  private func rootTaskBody() async {
    let drainer = self.executorPreference as? any ManualDrainer
    await IssueReporter.$current.withValue(self.reporter) {
      await TestExecution.$drainer.withValue(drainer) {
        await EffectSupervisor.$current.withValue(self) {
          await self.runRootTask()
        }
      }
    }
    await self.rootTaskEnded()
  }

  /// How many effects run directly in the root group before new ones go to shards.
  static let directChildLimit = 64
  /// How many effects a shard takes before the next one opens.
  static let shardCapacity = 64

  /// Runs jobs as children of the root group while few are live; past that, in *shards*: child
  /// tasks of the root that each run a group of at most `shardCapacity` effects.
  ///
  /// NB: the runtime unlinks a finished child from its group by walking the group's child list, so
  /// with every effect in one group, ending an effect cost O(live effects) (41% of a `cancel(id:)`
  /// with 10,000 effects live). Shards keep every group short.
  private func runRootTask() async {
    await withDiscardingTaskGroup { group in
      var batch: [any EffectJob] = []
      var shard: EffectShard?
      var shardCount = 0
      while await self.nextBatch(into: &batch) {
        for job in batch {
          if self.directChildren.load(ordering: .relaxed) < Self.directChildLimit {
            self.directChildren.add(1, ordering: .relaxed)
            group.addTask(priority: job.priority) { await job.run(on: self, direct: true) }
            continue
          }
          if shard == nil || shardCount == Self.shardCapacity {
            shard?.close()
            let next = EffectShard(supervisor: self)
            shard = next
            shardCount = 0
            group.addTask { await next.run() }
          }
          shard?.post(job)
          shardCount += 1
        }
        batch.removeAll(keepingCapacity: true)
      }
      shard?.close()
    }
  }

  /// Moves pending jobs into `batch`, parking until there are some; `false` once shut down.
  private func nextBatch(into batch: inout [any EffectJob]) async -> Bool {
    while true {
      switch self.guarded.withLock({ $0.machine.takeJobs(into: &batch) }) {
      case .jobs: return true
      case .closed: return false
      case .empty: break
      }
      // NB: the lock is never held across a suspension point.
      await withUnsafeContinuation { continuation in
        self.guarded.withLock { $0.machine.parkRootTask(continuation) }?.resume()
      }
    }
  }

  /// A job that ran directly in the root group has ended.
  func directChildEnded() {
    self.directChildren.subtract(1, ordering: .relaxed)
  }

  // MARK: - Running and finishing units

  /// Called by the task about to run a unit; `false` (and the unit is finished) when it must not
  /// run.
  func start(_ token: any EffectUnit) -> Bool {
    withUnsafeCurrentTask { task in
      guard let task else { preconditionFailure("An effect started outside a task.") }
      let start = self.guarded.withLock { $0.machine.start(token.id, in: TaskSlot(task)) }
      switch start {
      case .run:
        return true
      case .skip(let resumptions):
        Self.resume(resumptions)
        return false
      }
    }
  }

  /// Called by the task that ran a unit, after its work returned.
  func finish(_ token: any EffectUnit) async {
    while true {
      switch self.guarded.withLock({ $0.machine.finish(token.id) }) {
      case .finished(let resumptions):
        Self.resume(resumptions)
        return
      case .waitForCancellers:
        // NB: another thread is about to call `cancel()` on this task, which must stay alive
        // until it has (see `TaskSlot`).
        await withUnsafeContinuation { continuation in
          self.guarded.withLock { $0.machine.parkFinishing(token.id, waiter: continuation) }?
            .resume()
        }
      }
    }
  }

  /// Finishes a unit whose synchronous work (a cancellable `.send`) the store did itself.
  @usableFromInline
  func complete(_ token: any EffectUnit) {
    let finish = self.guarded.withLock { $0.machine.finish(token.id) }
    if case .finished(let resumptions) = finish { Self.resume(resumptions) }
  }

  /// Finishes a unit whose job will not run it.
  func abandon(_ token: any EffectUnit) {
    Self.resume(self.guarded.withLock { $0.machine.abandon(token.id) })
  }

  // MARK: - Cancelling

  /// Cancels every unit registered under any of `keys`.
  func cancel(_ keys: [CancelKey]) {
    self.perform(self.guarded.withLock { $0.machine.cancel(keys) })
  }

  /// Cancels every unit of a lifetime, and any that joins it later.
  func cancel(lifetime: any EffectUnit) {
    self.perform(self.guarded.withLock { $0.machine.cancel(lifetime: lifetime) })
  }

  /// Cancels every unit, leaving the store open.
  func cancelAll() {
    self.perform(self.guarded.withLock { $0.machine.cancelAll() })
  }

  /// Cancels the tasks outside the lock (cancellation handlers run synchronously and may take it),
  /// then releases the pins taken under it.
  private func perform(_ cancellation: Machine.Cancellation) {
    Self.resume(cancellation.resumptions)
    guard !cancellation.tasks.isEmpty else { return }
    for (_, slot) in cancellation.tasks {
      slot.cancel()
    }
    let ids = cancellation.tasks.map(\.0)
    Self.resume(self.guarded.withLock { $0.machine.unpin(ids) })
  }

  private static func resume(_ resumptions: Resumptions<UnsafeContinuation<Void, Never>>) {
    resumptions.first?.resume()
    for waiter in resumptions.others { waiter.resume() }
  }

  // MARK: - Waiting

  /// Suspends until every unit of `lifetime` has finished.
  func wait(for lifetime: any EffectUnit) async {
    if self.isFinished(lifetime) { return }
    await withUnsafeContinuation { continuation in
      self.guarded.withLock { $0.machine.wait(for: lifetime, continuation) }?.resume()
    }
  }

  func isFinished(_ lifetime: any EffectUnit) -> Bool {
    self.guarded.withLock { $0.machine.isFinished(lifetime) }
  }

  /// Suspends until no unit is live, or the waiting task is cancelled.
  func waitUntilIdle() async {
    let ticket = self.guarded.withLock { $0.machine.makeIdleTicket() }
    await withTaskCancellationHandler {
      await withUnsafeContinuation { (continuation: UnsafeContinuation<Void, Never>) in
        self.guarded.withLock {
          $0.machine.waitUntilIdle(continuation, ticket: ticket, cancelled: Task.isCancelled)
        }?.resume()
      }
    } onCancel: {
      self.guarded.withLock { $0.machine.abandonIdleWait(ticket: ticket) }?.resume()
    }
  }

  // MARK: - Shutting down

  /// Stops accepting work, cancels every effect and the root task, and returns the root task so the
  /// caller can wait for it to end.
  @usableFromInline @discardableResult
  func shutDown() -> Task<Void, Never>? {
    let (shutDown, rootTask) = self.guarded.withLock { ($0.machine.shutDown(), $0.rootTask) }
    for job in shutDown.abandoned { job.abandon(on: self) }
    rootTask?.cancel()
    shutDown.rootTask?.resume()
    self.perform(shutDown.cancellation)
    return rootTask
  }

  var isShutDown: Bool {
    self.guarded.withLock { $0.machine.phase == .shutDown }
  }

  // MARK: - Throttling

  // MARK: - Observing

  /// Records the error the effect running in the current task threw, for its end event.
  func recordFailure(_ error: any Error) {
    guard self.observer != nil else { return }
    withUnsafeCurrentTask { task in
      guard let task else { return }
      self.guarded.withLock { guarded in
        guard let id = guarded.machine.runningUnit(where: { $0.isRunning(task) }) else { return }
        guarded.failures[id] = error
      }
    }
  }

  /// Tells the observer a `.run` unit ended, and how.
  func reportEnd(of unit: any EffectUnit, to observer: any StoreObserver) {
    let failure = self.guarded.withLock { $0.failures.removeValue(forKey: unit.id) }
    let outcome: EffectOutcome
    if let failure {
      outcome = .failed(failure)
    } else {
      outcome = unit.isCancelled ? .cancelled : .finished
    }
    observer.effectEnded(EffectReference(unit), outcome: outcome)
  }

  // MARK: - Debouncing

  /// Applies the registration steps collected so far (not the jobs), so a decision taken from
  /// per-store state next sees every cancellation the effect named before it.
  func applySteps(_ steps: inout [PlanStep]) {
    var noJobs: [any EffectJob] = []
    self.apply(&steps, jobs: &noJobs)
  }

  /// Re-arms the sleeping timer of `key`; `false` if there is none.
  func rearmDebounce(_ key: CancelKey, deadline: any Sendable, body: any Sendable) -> Bool {
    self.guarded.withLock { $0.machine.rearmDebounce(key, deadline: deadline, body: body) }
  }

  /// Cancels what runs under `key` (a fired timer's body), then records a new timer.
  func armDebounce(_ key: CancelKey, deadline: any Sendable, body: any Sendable) -> UInt64 {
    let (cancellation, generation) = self.guarded.withLock { guarded in
      let cancellation = guarded.machine.cancel([key])
      return (cancellation, guarded.machine.armDebounce(key, deadline: deadline, body: body))
    }
    self.perform(cancellation)
    return generation
  }

  func wakeDebounce(
    _ key: CancelKey,
    generation: UInt64,
    sleptUntil isSameDeadline: (any Sendable) -> Bool
  ) -> EffectStateMachine<any EffectJob, UnsafeContinuation<Void, Never>, TaskSlot>.DebounceWake {
    self.guarded.withLock {
      $0.machine.wakeDebounce(key, generation: generation, sleptUntil: isSameDeadline)
    }
  }

  func endDebounce(_ key: CancelKey, generation: UInt64) {
    self.guarded.withLock { $0.machine.endDebounce(key, generation: generation) }
  }

  /// Ids with a debounce timer, and ids with throttle state.
  var timingStateCounts: (debounces: Int, throttles: Int) {
    self.guarded.withLock { ($0.machine.debounceCount, $0.machine.throttleCount) }
  }

  // MARK: - Ordered queues

  /// Takes the next place in the queue `key` (on the store, in the order effects were returned).
  func enqueue(on key: CancelKey) -> QueueTicket {
    self.guarded.withLock { $0.machine.enqueue(on: key) }
  }

  /// Suspends until every place taken before `ticket` has been left.
  func waitForTurn(_ ticket: QueueTicket) async {
    await withUnsafeContinuation { continuation in
      self.guarded.withLock { $0.machine.waitForTurn(ticket, continuation) }?.resume()
    }
  }

  /// Leaves the queue, starting the next place's turn.
  func leaveQueue(_ ticket: QueueTicket) {
    self.guarded.withLock { $0.machine.leaveQueue(ticket) }?.resume()
  }

  /// Queues with a place taken and not yet left.
  var queueCount: Int {
    self.guarded.withLock { $0.machine.queueCount }
  }

  /// Reads and updates the throttle state of `key` (see `Effect.throttle`).
  func withThrottleState<R: Sendable>(for key: CancelKey, _ body: (inout ThrottleState) -> R) -> R {
    self.guarded.withLock { $0.machine.withThrottleState(for: key, body) }
  }

  // MARK: - Introspection (tests and benchmarks)

  /// Units registered and not finished.
  var liveCount: Int {
    self.guarded.withLock { $0.machine.liveCount }
  }

  /// Identifiers with at least one unfinished unit.
  var registeredIdentifierCount: Int {
    self.guarded.withLock { $0.machine.registeredIdentifierCount }
  }

  /// The origins of the lifetimes with unfinished units, in the order they were sent.
  var unfinishedOrigins: [EffectOrigin] {
    self.guarded.withLock { $0.machine.unfinishedOrigins }
  }
}

/// A group of at most ``EffectSupervisor/shardCapacity`` effects, fed by the root task through its
/// own ``Mailbox``; it ends once closed and its effects have ended.
final class EffectShard: Sendable {
  private let mailbox = LockedBox(Mailbox<any EffectJob, UnsafeContinuation<Void, Never>>())
  private let supervisor: EffectSupervisor

  init(supervisor: EffectSupervisor) {
    self.supervisor = supervisor
  }

  func post(_ job: any EffectJob) {
    self.mailbox.withLock { $0.post(job) }?.resume()
  }

  /// No more jobs will come.
  func close() {
    self.mailbox.withLock { $0.close() }?.resume()
  }

  func run() async {
    await withDiscardingTaskGroup { group in
      var batch: [any EffectJob] = []
      while true {
        switch self.mailbox.withLock({ $0.take(into: &batch) }) {
        case .jobs:
          for job in batch {
            group.addTask(priority: job.priority) {
              await job.run(on: self.supervisor, direct: false)
            }
          }
          batch.removeAll(keepingCapacity: true)
        case .closed:
          return
        case .empty:
          await withUnsafeContinuation { continuation in
            self.mailbox.withLock { $0.park(continuation) }?.resume()
          }
        }
      }
    }
  }
}

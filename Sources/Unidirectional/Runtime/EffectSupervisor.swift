import Synchronization

/// Runs the effects of one root store: the thin executor around an ``EffectStateMachine``.
///
/// It owns the lock that guards the machine, starts one task per job the store hands it (the
/// effect a reducer returned; a `merge` or `concatenate` inside it runs as structured children of
/// that task) and performs what the machine's transitions return: resuming waiters and cancelling
/// tasks. Nothing here is isolated to the store, so effects finish, and `StoreTask.cancel()`
/// works, without hopping to it.
///
/// Every task it starts is counted until it ends; shutting down cancels them all, and the last one
/// to end runs `effectsEnded` (the store uses it to let go of its state). When none is alive,
/// ``shutDown()`` says so and the store lets go itself, on its executor; only callers off it
/// (``shutDownOffTheStore()``) start a task for `effectsEnded`.
@usableFromInline final class EffectSupervisor: Sendable {
  typealias Machine = EffectStateMachine<any EffectJob, UnsafeContinuation<Void, Never>, TaskSlot>

  // NB: the flag last, so the lock that follows in the same allocation packs against it.
  struct Guarded: Sendable {
    /// What few stores use, behind one pointer (24 B fewer in every store with an effect).
    private var occasional = OutOfLine<Occasional>()
    var machine = Machine()
    /// A graceful shutdown has begun: effects marked `cancelledOnShutdown()` no longer start.
    var isDraining = false

    /// Errors effects threw, until they end (only with an observer).
    var failures: [EffectID: any Error] {
      get { self.occasional.read({ $0.failures }, unallocated: .init()) }
      _modify { yield &self.occasional.value.failures }
    }
    /// Waiters of ``waitUntilOthersEnded()``: an effect of this store shutting it down.
    var selfWaiters: [Int: UnsafeContinuation<Void, Never>] {
      get { self.occasional.read({ $0.selfWaiters }, unallocated: .init()) }
      _modify { yield &self.occasional.value.selfWaiters }
    }
    var nextSelfWaiter: Int {
      get { self.occasional.read({ $0.nextSelfWaiter }, unallocated: 0) }
      _modify { yield &self.occasional.value.nextSelfWaiter }
    }

    /// Counts a task's end: the machine's end, and the effects shutting their store down that
    /// no longer wait for any task but their own.
    mutating func endJob() -> (Machine.JobEnd, [UnsafeContinuation<Void, Never>]) {
      let end = self.machine.jobEnded()
      guard !self.selfWaiters.isEmpty, self.machine.liveJobs <= 1 else { return (end, []) }
      defer { self.selfWaiters = [:] }
      return (end, Array(self.selfWaiters.values))
    }
  }

  /// ``Guarded``'s rarely used fields.
  private struct Occasional: EmptyInitializable, Sendable {
    var failures: [EffectID: any Error] = [:]
    var selfWaiters: [Int: UnsafeContinuation<Void, Never>] = [:]
    var nextSelfWaiter = 0
  }

  /// The machine and what else the lock guards; touched only by the supervisor's own files.
  let guarded = LockedBox(Guarded())
  /// Whether a graceful shutdown has begun (``beginDraining()``), read by the planner without the
  /// lock.
  let draining = Atomic<Bool>(false)
  /// A test executor, a custom reporter or an observer; `nil` for a plain store's effects (the
  /// supervisor is then ~80 B smaller).
  let extras: Extras?
  let effectsEnded: @Sendable () async -> Void

  /// What only some stores' effects need.
  final class Extras: Sendable {
    let executorPreference: (any TaskExecutor)?
    /// The test executor effects settle on (``TestClock``), when the preference is one.
    let drainer: (any ManualDrainer)?
    let reporter: IssueReporter
    let observer: (any StoreObserver)?
    /// Whether effect tasks inherit the sending task's task-locals (a store used in a test).
    let inheritsTaskContext: Bool
    /// Starts measuring an effect's duration on the store's `continuousClock` (with an observer).
    let stopwatch: (@Sendable () -> @Sendable () -> Duration)?

    init(
      executorPreference: (any TaskExecutor)?,
      reporter: IssueReporter,
      observer: (any StoreObserver)?,
      clock: (any Clock<Duration>)?,
      inheritsTaskContext: Bool
    ) {
      self.executorPreference = executorPreference
      self.inheritsTaskContext = inheritsTaskContext
      self.drainer = executorPreference as? any ManualDrainer
      self.reporter = reporter
      self.observer = observer
      if observer != nil, let clock {
        self.stopwatch = makeStopwatch(clock)
      } else {
        self.stopwatch = nil
      }
    }
  }

  /// The supervisor of the effect the current task runs, for `withTaskCancellation(id:)`.
  @TaskLocal static var current: EffectSupervisor?

  init(
    executorPreference: (any TaskExecutor)?,
    reporter: IssueReporter,
    observer: (any StoreObserver)? = nil,
    clock: (any Clock<Duration>)? = nil,
    cancelsTimers: Bool = true,
    inheritsTaskContext: Bool = false,
    effectsEnded: @escaping @Sendable () async -> Void = {}
  ) {
    if executorPreference == nil && reporter.isDefault && observer == nil && !inheritsTaskContext {
      self.extras = nil
    } else {
      self.extras = Extras(
        executorPreference: executorPreference,
        reporter: reporter,
        observer: observer,
        clock: clock,
        inheritsTaskContext: inheritsTaskContext
      )
    }
    self.effectsEnded = effectsEnded
    // NB: the mutation test's switch (`StoreConfiguration.cancelsTimers`).
    if !cancelsTimers { self.guarded.withLock { $0.machine.cancelsTimers = false } }
  }

  deinit {
    self.guarded.withLock { $0.machine.releaseListed() }
  }

  /// The executor effect tasks prefer (a test store's), if any.
  var executorPreference: (any TaskExecutor)? { self.extras?.executorPreference }

  /// Whether effect tasks start as children of the sending task's context (`Task {}`), carrying
  /// its task-locals, instead of detached: true for a store whose first effect started while a
  /// Swift Testing test ran, so an issue an effect reports reaches that test (and its
  /// `withKnownIssue`).
  var inheritsTaskContext: Bool { self.extras?.inheritsTaskContext ?? false }

  /// Whether effect tasks start through ``startEffectTask(priority:on:_:)``: in a test, or with
  /// an observer.
  var startsInContext: Bool {
    guard let extras = self.extras else { return false }
    return extras.inheritsTaskContext || extras.observer != nil
  }

  /// `operation`, run with what the observer captures now (on the starting task) bound for the
  /// effect's events; `operation` itself without an observer.
  func observedBody(
    _ operation: @escaping @Sendable () async -> Void
  ) -> @Sendable () async -> Void {
    guard let context = self.observer?.effectContext() else { return operation }
    return { await EffectReference.$startingContext.withValue(context) { await operation() } }
  }

  // MARK: - Registering and submitting

  /// Registers the units a reducer returned and cancels what it asked to cancel, in order, then
  /// starts a task per job (or hands the jobs to the send on this thread that holds starts back:
  /// ``Store/trySendStartingEffectsHere(_:reading:)``).
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
          cancellation.listedTasks += more.listedTasks
          cancellation.resumptions.append(contentsOf: more.resumptions)
          cancellation.timers.append(contentsOf: more.timers)
        }
      }
      guard !jobs.isEmpty else { return nil }
      return guarded.machine.submit(jobs)
    }
    steps.removeAll(keepingCapacity: true)
    self.perform(cancellation)
    switch submission {
    case .run:
      let held = PlanScratch.withCurrent { scratch in
        guard scratch.isHoldingStarts else { return false }
        for job in jobs { scratch.heldStarts.append(job, on: self) }
        return true
      }
      if !held {
        for job in jobs { job.startTask(on: self) }
      }
    case .abandon: for job in jobs { job.abandon(on: self) }
    case nil: break
    }
    jobs.removeAll(keepingCapacity: true)
  }

  /// Queues the timers a reducer returned, now registered, with their clocks' hosts; a timer
  /// registered cancelled (the store has shut down) is not queued.
  ///
  /// Empties the array, keeping its capacity.
  @usableFromInline
  func arm(_ timers: inout [TimerEntry]) {
    for timer in timers { timer.host.arm(timer) }
    timers.removeAll(keepingCapacity: true)
  }

  /// Re-arms the armed timer under `key` in place, instead of cancelling it for a new record.
  ///
  /// A one-shot timer under `key` alone that cancels in flight would replace it: its host moves
  /// it to `deadline` (and `update` gives it the new action), and it joins `lifetime`, the
  /// send's. The old lifetime finishes if the timer was its last unit.
  ///
  /// - Returns: The lifetime the timer joined (a new token when the send had none yet), or `nil`
  ///   when the timer cannot be re-armed in place (``EffectStateMachine/rearmCandidate(_:flags:)``
  ///   says when): nothing changed, and the caller cancels and registers as usual.
  @usableFromInline
  func rearmInPlace(
    _ key: CancelKey,
    flags: UInt8,
    host: any TimerHost,
    deadline: Duration,
    lifetime: (any EffectUnit)?,
    update: (TimerEntry) -> Bool
  ) -> (any EffectUnit)? {
    if let lifetime, lifetime.isLifetimeCancelled { return nil }
    let (joined, resumptions) = self.guarded.withLock {
      guarded -> ((any EffectUnit)?, Resumptions<UnsafeContinuation<Void, Never>>) in
      guard let timer = guarded.machine.rearmCandidate(key, flags: flags), timer.host === host,
        host.rearm(timer, deadline: deadline, update: update)
      else { return (nil, Resumptions()) }
      // NB: a timer that was the first unit of its send stands for that send's lifetime (its
      // `StoreTask` holds it), so it cannot stand for this one too: a send whose first unit is
      // the re-armed timer gets a token of its own.
      let moved = guarded.machine.moveRearmed(timer, to: lifetime)
      return (moved.joined, moved.resumptions)
    }
    Self.resume(resumptions)
    return joined
  }

  /// Starts the effect of a timer that fired (``RunTimerOperation``): the job `makeJob` makes, in
  /// the timer's lifetime, takes the timer's place under its identifiers, and its task starts.
  ///
  /// A timer cancelled meanwhile (its identifier, its lifetime, shutdown) starts nothing.
  func startFired<Action: Sendable>(
    _ timer: TimerEntry,
    makeJob: (any EffectUnit) -> RunJob<Action>
  ) {
    let started = self.guarded.withLock {
      guarded -> (RunJob<Action>, Machine.Submission, Resumptions<UnsafeContinuation<Void, Never>>)?
      in
      guard let keys = guarded.machine.keysOfPendingTimer(timer) else { return nil }
      // NB: made under the lock: the timer's lifetime changes only under it (a re-arm in place).
      let job = makeJob(timer.lifetime)
      job.insertFlags(timer.loadFlags() & UnitFlags.cancelledOnShutdown)
      // The job joins the lifetime before the timer leaves it, so the lifetime does not end.
      guarded.machine.register(job, keys: keys)
      var resumptions = Resumptions<UnsafeContinuation<Void, Never>>()
      if case .finished(let finished) = guarded.machine.finish(timer.id) {
        resumptions = finished
      }
      return (job, guarded.machine.submit([job]), resumptions)
    }
    guard let (job, submission, resumptions) = started else { return }
    Self.resume(resumptions)
    switch submission {
    case .run: job.startTask(on: self)
    case .abandon: job.abandon(on: self)
    }
  }

  /// Records what started a lifetime (test diagnostics).
  func setOrigin(_ origin: EffectOrigin, of lifetime: any EffectUnit) {
    self.guarded.withLock { $0.machine.setOrigin(origin, of: lifetime) }
  }

  // MARK: - Effect tasks

  /// Whether effect tasks bind only ``current`` (see ``runBindingEverything(_:)``): the store's
  /// reporter is the default, no test executor drives them and they did not inherit a sender's
  /// task-locals.
  var bindsOnlyItself: Bool {
    guard let extras = self.extras else { return true }
    return extras.drainer == nil && extras.reporter.isDefault && !extras.inheritsTaskContext
  }

  /// Runs `job` with every task-local of the store bound: the supervisor, the store's issue
  /// reporter and the test drainer (when they are not the defaults).
  ///
  /// NB: a `.run`'s task (``EffectJob/runAsTask(on:)``), in the common case, binds only
  /// ``current``, with a closure literal: passing a closure *value* to
  /// `TaskLocal.withValue` costs a reabstraction thunk frame (240 B), and every frame of a
  /// suspended effect costs memory (the task allocator grows in 1 KB slabs).
  ///
  /// A task that inherited the sender's task-locals gets the default dependencies bound too, so
  /// the sender's `withDependencies` overrides do not leak into the store's effects.
  func runBindingEverything(_ job: () async -> Void) async {
    if self.inheritsTaskContext {
      await DependencyValues.$taskValues.withValue(DependencyValues()) {
        await self.runBindingStoreValues(job)
      }
    } else {
      await self.runBindingStoreValues(job)
    }
  }

  private func runBindingStoreValues(_ job: () async -> Void) async {
    await EffectSupervisor.$current.withValue(self) {
      await IssueReporter.$current.withValue(self.extras?.reporter ?? .default) {
        await TestExecution.$drainer.withValue(self.extras?.drainer, operation: job)
      }
    }
  }

  /// Counts an effect task's end (the count the machine took in ``apply(_:jobs:)``); the last one
  /// after shutdown lets go of what effects needed.
  func taskEnded() async {
    if self.endTask() { await self.effectsEnded() }
  }

  /// ``finish(_:)`` of a task's only unit and ``taskEnded()`` of its task, in one trip to the lock
  /// (a lone `.run`'s task: one lock acquisition fewer per effect).
  ///
  /// The last task to end after shutdown runs `effectsEnded` here, still inside the task's
  /// task-local bindings (which it does not read).
  func finishAndEndTask(_ token: any EffectUnit) async {
    while true {
      guard let (finished, end, selfWaiters) = self.finishAndEndNow(token) else {
        // NB: another thread is about to call `cancel()` on this task (see `finish(_:)`).
        await withUnsafeContinuation { continuation in
          self.guarded.withLock { $0.machine.parkFinishing(unit: token, waiter: continuation) }?
            .resume()
        }
        continue
      }
      Self.resume(finished)
      Self.resume(end.resumptions)
      for waiter in selfWaiters { waiter.resume() }
      if end.ended { await self.effectsEnded() }
      return
    }
  }

  /// The synchronous part of ``finishAndEndTask(_:)``: `nil` when the unit must wait for its
  /// cancellers first (the task then has not ended).
  @inline(never)
  private func finishAndEndNow(
    _ token: any EffectUnit
  ) -> (
    Resumptions<UnsafeContinuation<Void, Never>>, Machine.JobEnd, [UnsafeContinuation<Void, Never>]
  )? {
    self.guarded.withLock { guarded in
      guard case .finished(let finished) = guarded.machine.finish(unit: token) else { return nil }
      let (end, selfWaiters) = guarded.endJob()
      return (finished, end, selfWaiters)
    }
  }

  // NB: the synchronous steps that take the lock are `@inline(never)` wherever an effect's task
  // calls them: inlined into the task's async frames, the machine's temporaries (records copied
  // out of its maps) grew those frames past a slab of the task allocator: one more 1 KB malloc
  // per effect (`AllocationGates`) and per suspended effect.

  /// The synchronous part of ``taskEnded()``; `true` when it was the last task after shutdown.
  @inline(never)
  private func endTask() -> Bool {
    let (end, selfWaiters) = self.guarded.withLock { $0.endJob() }
    Self.resume(end.resumptions)
    for waiter in selfWaiters { waiter.resume() }
    return end.ended
  }

  /// Whether the current task runs one of this supervisor's effects.
  var isCurrentEffect: Bool {
    EffectSupervisor.current === self
  }

  /// Suspends until no effect task but the caller's is alive (the caller is an effect of this
  /// store: waiting for every task would wait for itself).
  ///
  /// - Parameter cancellable: Whether cancelling the waiting task ends the wait (a graceful
  ///   shutdown's timed wait), or not (a shutdown, which has just cancelled the caller too).
  func waitUntilOthersEnded(cancellable: Bool = false) async {
    let ticket = self.guarded.withLock { guarded in
      defer { guarded.nextSelfWaiter += 1 }
      return guarded.nextSelfWaiter
    }
    let wait = {
      await withUnsafeContinuation { (continuation: UnsafeContinuation<Void, Never>) in
        let ready = self.guarded.withLock { guarded -> Bool in
          if guarded.machine.liveJobs <= 1 || (cancellable && Task.isCancelled) { return true }
          guarded.selfWaiters[ticket] = continuation
          return false
        }
        if ready { continuation.resume() }
      }
    }
    guard cancellable else { return await wait() }
    await withTaskCancellationHandler {
      await wait()
    } onCancel: {
      self.guarded.withLock { $0.selfWaiters.removeValue(forKey: ticket) }?.resume()
    }
  }

  /// ``waitUntilOthersEnded()``, giving up after `duration` on `clock`; `true` when they ended.
  func waitUntilOthersEnded(
    orAfter duration: Duration,
    on clock: any Clock<Duration>
  ) async
    -> Bool
  {
    if self.guarded.withLock({ $0.machine.liveJobs <= 1 }) { return true }
    return await firstToFinish(
      { await self.waitUntilOthersEnded(cancellable: true) },
      orAfter: duration,
      on: clock
    )
  }

  // MARK: - Running and finishing units

  /// Called by the task about to run a unit; `false` (and the unit is finished) when it must not
  /// run.
  ///
  /// A listed unit (``UnitFlags/startsUnlocked``) starts without the lock unless it was cancelled
  /// first (``RunUnit/startUnlocked(in:)``).
  @inline(never)
  func start(_ token: any EffectUnit) -> Bool {
    withUnsafeCurrentTask { task in
      guard let task else { preconditionFailure("An effect started outside a task.") }
      let slot = TaskSlot(task)
      if let listed = Machine.listed(token) {
        if listed.startUnlocked(in: slot.unitSlotBits) { return true }
        // Cancelled before it started: whoever cancelled it has usually finished it too.
        Self.resume(self.guarded.withLock { $0.machine.skipListed(listed) })
        return false
      }
      let start = self.guarded.withLock { $0.machine.start(token.id, in: slot) }
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
      switch self.finishNow(token) {
      case .finished(let resumptions):
        Self.resume(resumptions)
        return
      case .waitForCancellers:
        // NB: another thread is about to call `cancel()` on this task, which must stay alive
        // until it has (see `TaskSlot`).
        await withUnsafeContinuation { continuation in
          self.guarded.withLock { $0.machine.parkFinishing(unit: token, waiter: continuation) }?
            .resume()
        }
      }
    }
  }

  @inline(never)
  private func finishNow(_ token: any EffectUnit) -> Machine.Finish {
    self.guarded.withLock { $0.machine.finish(unit: token) }
  }

  /// Finishes a unit whose synchronous work (a cancellable `.send`) the store did itself.
  @usableFromInline
  func complete(_ token: any EffectUnit) {
    let finish = self.guarded.withLock { $0.machine.finish(token.id) }
    if case .finished(let resumptions) = finish { Self.resume(resumptions) }
  }

  /// Finishes a unit whose job will not run it.
  @inline(never)
  func abandon(_ token: any EffectUnit) {
    Self.resume(self.guarded.withLock { $0.machine.abandon(unit: token) })
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

  /// Starts a graceful shutdown: cancels the effects marked `cancelledOnShutdown()`, and makes
  /// later marked effects start cancelled (``Effect/cancelledOnShutdown()``).
  func beginDraining() {
    self.draining.store(true, ordering: .releasing)
    self.perform(
      self.guarded.withLock { guarded in
        guarded.isDraining = true
        return guarded.machine.cancelMarkedForShutdown()
      }
    )
  }

  /// Whether a graceful shutdown has begun.
  var isDraining: Bool {
    self.guarded.withLock { $0.isDraining }
  }

  /// ``isDraining`` without the lock, for the planner.
  @usableFromInline var hasBegunDraining: Bool {
    self.draining.load(ordering: .acquiring)
  }

  /// Cancels every unit, leaving the store open.
  func cancelAll() {
    self.perform(self.guarded.withLock { $0.machine.cancelAll() })
  }

  /// Cancels the tasks outside the lock (cancellation handlers run synchronously and may take it),
  /// then releases the pins taken under it.
  func perform(_ cancellation: Machine.Cancellation) {
    if let timer = cancellation.timers.first {
      timer.host.disarm(timer)
      for timer in cancellation.timers.others { timer.host.disarm(timer) }
    }
    Self.resume(cancellation.resumptions)
    guard !cancellation.tasks.isEmpty || !cancellation.listedTasks.isEmpty else { return }
    for (_, slot) in cancellation.tasks { slot.cancel() }
    for (_, slot) in cancellation.listedTasks { slot.cancel() }
    let ids = cancellation.tasks.map(\.0)
    let units = cancellation.listedTasks.map(\.0)
    Self.resume(
      self.guarded.withLock { guarded in
        var resumptions = guarded.machine.unpin(ids)
        resumptions.append(contentsOf: guarded.machine.unpinListed(units))
        return resumptions
      }
    )
  }

  private static func resume(_ resumptions: Resumptions<UnsafeContinuation<Void, Never>>) {
    resumptions.first?.resume()
    for waiter in resumptions.others { waiter.resume() }
  }

  /// Applies the registration steps collected so far (not the jobs), so a decision taken from
  /// per-store state next sees every cancellation the effect named before it.
  @usableFromInline func applySteps(_ steps: inout [PlanStep]) {
    var noJobs: [any EffectJob] = []
    self.apply(&steps, jobs: &noJobs)
  }
}

/// Measures durations on `clock`: each call starts a measurement and returns its reading.
private func makeStopwatch<C: Clock>(_ clock: C) -> @Sendable () -> @Sendable () -> Duration
where C.Duration == Duration {
  {
    let start = clock.now
    return { start.duration(to: clock.now) }
  }
}

/// A unit that knows the action whose reduce returned it.
protocol DescribesStartingAction {
  var startingActionDescription: String? { get }
}

extension RunJob: DescribesStartingAction {}

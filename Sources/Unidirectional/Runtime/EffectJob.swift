import Synchronization

/// The work of one effect task: one `.run` unit, or a plan of several.
@usableFromInline protocol EffectJob: AnyObject, Sendable {
  /// The priority of the task.
  var priority: TaskPriority? { get }

  /// Runs the work; every unit starts and finishes through the supervisor.
  func run(on supervisor: EffectSupervisor) async

  /// Starts the task that runs the work as an effect of the supervisor's store.
  ///
  /// NB: detached, so an effect never inherits the task-locals of whichever task sent the action
  /// (its dependency overrides, say): it gets the store's, bound by
  /// ``EffectSupervisor/runTask(_:)``. Not a child of a per-store task group: that group's parent
  /// task cost ~2 KB for the store's whole life, and adding a child meant waking the parent first
  /// (DESIGN.md, *Decisions*). The store owns the task all the same: the
  /// supervisor counts it, cancels it, and waits for it to end.
  func startTask(on supervisor: EffectSupervisor)

  /// The whole body of that task: the work with the store's task-locals bound, then the
  /// supervisor's count of tasks. ``EffectStarts`` runs it in a task it starts on the calling
  /// thread.
  func runAsTask(on supervisor: EffectSupervisor) async

  /// Finishes every unit without running it (the store shut down first).
  func abandon(on supervisor: EffectSupervisor)
}

/// One `.run` effect: its body, and its unit (one allocation for both).
///
/// A job of its own in the common case; a step of a ``PlanJob`` otherwise. Its ``Send`` holds it,
/// to deliver through it.
///
/// The body is let go of as the effect starts: a `Send` kept past its effect (in a box the body
/// captured, say) must not keep that body, and so itself, alive.
///
/// NB: no field of a type whose layout depends on `Action` or is not frozen (`Action?`,
/// `TaskPriority?`): this class's code is generic, and storing or destroying one looked up its
/// type's metadata at run time for every effect. The action a reducer returned it for lives in
/// the ``ReducedRunJob`` subclass, as an `Action`.
// Safety: every stored field is immutable, atomic or `Sendable`, but `body`, which has its own
// Safety note; the one subclass adds an immutable `Action` (`Sendable`). Not final only for that
// subclass, so the checker asks for this.
@usableFromInline class RunJob<Action: Sendable>: RunUnit, EffectJob, @unchecked Sendable {
  /// The priority's raw value (see ``RunOperation``).
  @usableFromInline final let rawPriority: UInt8?
  // Safety: read and cleared once, by `takeBody()`, in the one task that runs or abandons the
  // job; the state machine hands a job to exactly one of those (through its lock, which orders
  // this write at creation before that read). Nothing else touches it.
  private final nonisolated(unsafe) var body: (@concurrent @Sendable (Send<Action>) async -> Void)?
  @usableFromInline final let delivery: EffectDelivery<Action>

  /// A `.run` unit of `lifetime`, or the first unit of a new one.
  @usableFromInline init(
    lifetime: (any EffectUnit)?,
    operation: RunOperation<Action>,
    delivery: EffectDelivery<Action>
  ) {
    self.rawPriority = operation.rawPriority
    self.body = operation.body
    self.delivery = delivery
    super.init(lifetime: lifetime)
  }

  /// A `.run` unit, remembering the action whose reduce returned it when there is one.
  @inlinable static func make(
    lifetime: (any EffectUnit)?,
    operation: RunOperation<Action>,
    delivery: EffectDelivery<Action>,
    action: Action?
  ) -> RunJob {
    guard let action else {
      return RunJob(lifetime: lifetime, operation: operation, delivery: delivery)
    }
    return ReducedRunJob(
      lifetime: lifetime,
      operation: operation,
      delivery: delivery,
      action: action
    )
  }

  @usableFromInline final var priority: TaskPriority? {
    self.rawPriority.map(TaskPriority.init(rawValue:))
  }

  /// The action whose reduce returned this effect, described for a diagnostic.
  var startingActionDescription: String? {
    nil
  }

  /// The effect's body, once: later calls return `nil`.
  final func takeBody() -> (@concurrent @Sendable (Send<Action>) async -> Void)? {
    defer { self.body = nil }
    return self.body
  }

  @usableFromInline final func run(on supervisor: EffectSupervisor) async {
    await EffectPlan.run(self, on: supervisor)
  }

  @usableFromInline final func startTask(on supervisor: EffectSupervisor) {
    let priority = self.priority ?? .medium
    if supervisor.startsInContext {
      startEffectTask(priority: priority, on: supervisor) { await self.runAsTask(on: supervisor) }
      return
    }
    guard let preference = supervisor.executorPreference else {
      // NB: no preference at all, not a `nil` one: a task created with one (even `nil`) carries a
      // preference record that every hop of every effect looks up.
      Task.detached(priority: priority) { await self.runAsTask(on: supervisor) }
      return
    }
    Task.detached(executorPreference: preference, priority: priority) {
      await self.runAsTask(on: supervisor)
    }
  }

  /// NB: `startTask(on:)`'s task calls this too: the method's frame fits the slab a suspended
  /// effect's task already takes (the bytes-per-suspended-effect row is the same either way).
  @usableFromInline final func runAsTask(on supervisor: EffectSupervisor) async {
    if supervisor.bindsOnlyItself {
      await EffectSupervisor.$current.withValue(supervisor) {
        await EffectPlan.runAsTask(self, on: supervisor)
      }
    } else {
      await supervisor.runBindingEverything { await EffectPlan.runAsTask(self, on: supervisor) }
    }
  }

  /// Sends an action of this effect to its store.
  ///
  /// NB: inlinable, like ``Send/callAsFunction(_:)``: the hop to the store is then inline in the
  /// effect's body, with no frame of its own.
  @inlinable
  final func deliver(_ action: Action) async {
    await self.delivery.deliver(action, self)
  }

  @usableFromInline final func abandon(on supervisor: EffectSupervisor) {
    _ = self.takeBody()
    supervisor.abandon(self as UnitBase)
  }
}

/// A ``RunJob`` a reducer returned, with the action it reduced (for diagnostics).
// Safety: as for `RunJob`; `action` is immutable and `Sendable`.
@usableFromInline final class ReducedRunJob<Action: Sendable>: RunJob<Action>, @unchecked Sendable {
  private let action: Action

  @usableFromInline init(
    lifetime: (any EffectUnit)?,
    operation: RunOperation<Action>,
    delivery: EffectDelivery<Action>,
    action: Action
  ) {
    self.action = action
    super.init(lifetime: lifetime, operation: operation, delivery: delivery)
  }

  override var startingActionDescription: String? {
    debugDescription(of: self.action)
  }
}

/// Effects that must run in order, or concurrently inside an ordered step.
final class PlanJob<Action: Sendable>: EffectJob {
  private let plan: EffectPlan<Action>
  private let delivery: EffectDelivery<Action>

  init(plan: EffectPlan<Action>, delivery: EffectDelivery<Action>) {
    self.plan = plan
    self.delivery = delivery
  }

  var priority: TaskPriority? {
    self.plan.priority
  }

  func run(on supervisor: EffectSupervisor) async {
    await self.plan.execute(self.delivery, on: supervisor)
  }

  /// NB: a plan (a merge or concatenation, rarer than a lone `.run`) starts through the one
  /// general path and binds every task-local: a closure and a frame more than `RunJob`'s fast
  /// path, for one path instead of four.
  func startTask(on supervisor: EffectSupervisor) {
    startEffectTask(priority: self.priority ?? .medium, on: supervisor) {
      await self.runAsTask(on: supervisor)
    }
  }

  func runAsTask(on supervisor: EffectSupervisor) async {
    await supervisor.runBindingEverything {
      await self.plan.execute(self.delivery, on: supervisor)
    }
    await supervisor.taskEnded()
  }

  func abandon(on supervisor: EffectSupervisor) {
    self.plan.abandon(on: supervisor)
  }
}

// NB: not `indirect`: the arrays of `merge` and `concatenate` already box the recursion.
/// An effect after the store registered it: every asynchronous unit has its token.
enum EffectPlan<Action: Sendable>: Sendable {
  case run(RunJob<Action>)
  case send(EffectToken, Action)
  case cancel([CancelKey])
  case merge([EffectPlan])
  case concatenate([EffectPlan])
  /// Runs when its turn in an ordered queue comes, then lets the next place run.
  indirect case queued(QueueTicket, EffectPlan)

  var priority: TaskPriority? {
    switch self {
    case .run(let job): return job.priority
    case .queued(_, let plan): return plan.priority
    default: return nil
    }
  }

  /// Whether running this step inline could cancel the task that runs the steps after it.
  private var needsOwnTask: Bool {
    switch self {
    case .run, .merge, .concatenate, .queued: return true
    case .send, .cancel: return false
    }
  }

  func execute(_ delivery: EffectDelivery<Action>, on supervisor: EffectSupervisor) async {
    // NB: each case is its own function, so the frame a suspended effect keeps is only as large
    // as its own case needs.
    switch self {
    case .run(let job):
      await Self.run(job, on: supervisor)
    case .send(let token, let action):
      await Self.send(token, action, delivery, on: supervisor)
    case .cancel(let keys):
      supervisor.cancel(keys)
    case .merge(let plans):
      await Self.merge(plans, delivery, on: supervisor)
    case .concatenate(let plans):
      await Self.concatenate(plans, delivery, on: supervisor)
    case .queued(let ticket, let plan):
      await Self.queued(ticket, plan, delivery, on: supervisor)
    }
  }

  /// Waits for the turn, runs, and lets the next place run (even when cancelled: a cancelled plan's
  /// units skip at once, and the queue moves on).
  private static func queued(
    _ ticket: QueueTicket,
    _ plan: EffectPlan,
    _ delivery: EffectDelivery<Action>,
    on supervisor: EffectSupervisor
  ) async {
    await supervisor.waitForTurn(ticket)
    await plan.execute(delivery, on: supervisor)
    supervisor.leaveQueue(ticket)
  }

  /// Runs one `.run` unit (inlined into `RunJob`, to keep a frame off a suspended effect).
  ///
  /// NB: the observer's calls are out of line (``EffectSupervisor/observeStart(of:)``): inlined
  /// here, their existential and temporaries made this frame, which every suspended `.run`
  /// keeps, 288 B instead of 128.
  @inline(__always)
  static func run(_ job: RunJob<Action>, on supervisor: EffectSupervisor) async {
    if await self.runBody(of: job, on: supervisor) { await supervisor.finish(job as UnitBase) }
  }

  /// ``run(_:on:)`` as the whole of a task: the unit's finish and the task's end are one trip to
  /// the supervisor's lock (``EffectSupervisor/finishAndEndTask(_:)``).
  @inline(__always)
  static func runAsTask(_ job: RunJob<Action>, on supervisor: EffectSupervisor) async {
    if await self.runBody(of: job, on: supervisor) {
      await supervisor.finishAndEndTask(job as UnitBase)
    } else {
      await supervisor.taskEnded()
    }
  }

  /// Runs the unit's body, observed; `false` when it did not start (already run, or cancelled
  /// first), so there is nothing to finish.
  @inline(__always)
  private static func runBody(of job: RunJob<Action>, on supervisor: EffectSupervisor) async -> Bool
  {
    // NB: the unit as its class that is not generic: the optimizer turns these calls' `any
    // EffectUnit` into a generic parameter, and `RunJob<Action>`'s metadata is a lookup at run
    // time where this code is not specialized (``UnitBase``).
    let unit: UnitBase = job
    guard let body = job.takeBody(), supervisor.start(unit) else { return false }
    let stopwatch = supervisor.observeStart(of: unit)
    await body(Send(job: job))
    if let stopwatch { supervisor.observeEnd(of: unit, stopwatch: stopwatch) }
    return true
  }

  private static func send(
    _ token: EffectToken,
    _ action: Action,
    _ delivery: EffectDelivery<Action>,
    on supervisor: EffectSupervisor
  ) async {
    guard supervisor.start(token) else { return }
    await delivery.deliver(action, token)
    await supervisor.finish(token)
  }

  private static func merge(
    _ plans: [EffectPlan],
    _ delivery: EffectDelivery<Action>,
    on supervisor: EffectSupervisor
  ) async {
    await withDiscardingTaskGroup { group in
      for plan in plans {
        group.addTask(priority: plan.priority) { await plan.execute(delivery, on: supervisor) }
      }
    }
  }

  private static func concatenate(
    _ plans: [EffectPlan],
    _ delivery: EffectDelivery<Action>,
    on supervisor: EffectSupervisor
  ) async {
    for (index, plan) in plans.enumerated() {
      if index == plans.count - 1 || !plan.needsOwnTask {
        await plan.execute(delivery, on: supervisor)
      } else {
        // NB: cancelling a step cancels the task running it; give it its own task so the steps
        // after it still run.
        await withDiscardingTaskGroup { group in
          group.addTask(priority: plan.priority) { await plan.execute(delivery, on: supervisor) }
        }
      }
    }
  }

  /// Finishes every unit without running anything.
  func abandon(on supervisor: EffectSupervisor) {
    switch self {
    case .run(let job):
      job.abandon(on: supervisor)
    case .send(let token, _):
      supervisor.abandon(token)
    case .cancel:
      break
    case .merge(let plans), .concatenate(let plans):
      for plan in plans { plan.abandon(on: supervisor) }
    case .queued(let ticket, let plan):
      plan.abandon(on: supervisor)
      supervisor.leaveQueue(ticket)
    }
  }
}

/// Where a running effect's actions go: the store that started it.
///
/// ``deliver(_:_:)`` hops to the store's executor (the receiver, an actor) and hands the action
/// to the root core, which drops it when the unit was cancelled. The receiver's method is
/// synchronous, so the hop is the only suspension: no async frame is allocated per action, as
/// with `await actor.method()`.
@usableFromInline struct EffectDelivery<Action: Sendable>: Sendable {
  @usableFromInline let receiver: any EffectReceiver<Action>

  init(receiver: any EffectReceiver<Action>) {
    self.receiver = receiver
  }

  /// Hands `action` of `unit` to the store, on its executor, and returns once it is reduced.
  @inlinable
  func deliver(_ action: Action, _ unit: any EffectUnit) async {
    await self.receiver.receive(action, from: unit)
  }
}

/// An actor that receives the actions of running effects: a store's ``StoreIsolation``.
@usableFromInline protocol EffectReceiver<Action>: Actor {
  associatedtype Action: Sendable
  /// Reduces an action `unit` sent, unless `unit` was cancelled.
  func receive(_ action: Action, from unit: any EffectUnit)
}

/// Starts an effect's task for a store whose effects carry something from the task that starts
/// them: a store used in a test (the task is a child of the sender's context, which carries the
/// test) or an observed one (the task carries what the observer captured on the sending task,
/// ``StoreObserver/effectContext()``).
@usableFromInline
func startEffectTask(
  priority: TaskPriority,
  on supervisor: EffectSupervisor,
  _ operation: @escaping @Sendable () async -> Void
) {
  let body = supervisor.observedBody(operation)
  switch (supervisor.inheritsTaskContext, supervisor.executorPreference) {
  case (true, nil): Task(priority: priority) { await body() }
  case (true, let preference?):
    Task(executorPreference: preference, priority: priority) { await body() }
  case (false, nil): Task.detached(priority: priority) { await body() }
  case (false, let preference?):
    Task.detached(executorPreference: preference, priority: priority) { await body() }
  }
}

// NB: not `indirect`: the arrays of `merge` and `concatenate` already box the recursion.
/// An effect after the store registered it: every asynchronous unit has its box.
enum EffectPlan<Action: Sendable>: Sendable {
  case run(EffectBox, RunOperation<Action>)
  case send(EffectBox, Action)
  case cancel([CancelKey])
  case merge([EffectPlan])
  case concatenate([EffectPlan])

  var priority: TaskPriority? {
    if case .run(_, let run) = self { return run.priority }
    return nil
  }

  /// Whether running this step inline could cancel the task that runs the steps after it.
  private var needsOwnTask: Bool {
    switch self {
    case .run, .merge, .concatenate: return true
    case .send, .cancel: return false
    }
  }

  func execute(
    runtime: EffectRuntime,
    deliver: @escaping @Sendable (Action, EffectBox) async -> Void
  ) async {
    // NB: each case is its own function, so the frame a suspended effect keeps is only as
    // large as its own case needs (memory per suspended effect).
    switch self {
    case .run(let box, let run):
      await Self.executeRun(box, run, runtime: runtime, deliver: deliver)
    case .send(let box, let action):
      await Self.executeSend(box, action, runtime: runtime, deliver: deliver)
    case .cancel(let keys):
      runtime.cancel(keys)
    case .merge(let plans):
      await Self.executeMerge(plans, runtime: runtime, deliver: deliver)
    case .concatenate(let plans):
      await Self.executeConcatenation(plans, runtime: runtime, deliver: deliver)
    }
  }

  /// Runs one `.run` unit (shared with `RunJob`; inlined there, to keep a frame off a
  /// suspended effect).
  @inline(__always)
  static func executeRun(
    _ box: EffectBox,
    _ run: RunOperation<Action>,
    runtime: EffectRuntime,
    deliver: @escaping @Sendable (Action, EffectBox) async -> Void
  ) async {
    guard runtime.start(box) else { return }
    await run.body(Send(box: box, deliver: deliver))
    await runtime.finish(box)
  }

  private static func executeSend(
    _ box: EffectBox,
    _ action: Action,
    runtime: EffectRuntime,
    deliver: @escaping @Sendable (Action, EffectBox) async -> Void
  ) async {
    guard runtime.start(box) else { return }
    await deliver(action, box)
    await runtime.finish(box)
  }

  private static func executeMerge(
    _ plans: [EffectPlan],
    runtime: EffectRuntime,
    deliver: @escaping @Sendable (Action, EffectBox) async -> Void
  ) async {
    await withDiscardingTaskGroup { group in
      for plan in plans {
        group.addTask(priority: plan.priority) {
          await plan.execute(runtime: runtime, deliver: deliver)
        }
      }
    }
  }

  private static func executeConcatenation(
    _ plans: [EffectPlan],
    runtime: EffectRuntime,
    deliver: @escaping @Sendable (Action, EffectBox) async -> Void
  ) async {
    for (index, plan) in plans.enumerated() {
      if index == plans.count - 1 || !plan.needsOwnTask {
        await plan.execute(runtime: runtime, deliver: deliver)
      } else {
        // NB: cancelling a step cancels the task running it; give it its own task so the
        // steps after it still run.
        await withDiscardingTaskGroup { group in
          group.addTask(priority: plan.priority) {
            await plan.execute(runtime: runtime, deliver: deliver)
          }
        }
      }
    }
  }

  /// Finishes every box without running anything.
  func abandon(runtime: EffectRuntime) {
    switch self {
    case .run(let box, _), .send(let box, _):
      runtime.abandon(box)
    case .cancel:
      break
    case .merge(let plans), .concatenate(let plans):
      for plan in plans { plan.abandon(runtime: runtime) }
    }
  }
}

/// A unit the root task runs as one child: a type-erased plan.
///
/// Safety: immutable; subclasses add only immutable, `Sendable` stored properties.
@usableFromInline class EffectJob: @unchecked Sendable {
  let priority: TaskPriority?

  init(priority: TaskPriority?) {
    self.priority = priority
  }

  /// Runs the job; overridden.
  func run() async {}

  /// Finishes the job's boxes without running it; overridden.
  func abandon() {}
}

/// Safety: immutable, and every stored property is `Sendable`.
final class PlanJob<Action: Sendable>: EffectJob, @unchecked Sendable {
  private let plan: EffectPlan<Action>
  private let runtime: EffectRuntime
  private let deliver: @Sendable (Action, EffectBox) async -> Void

  init(
    plan: EffectPlan<Action>,
    runtime: EffectRuntime,
    deliver: @escaping @Sendable (Action, EffectBox) async -> Void
  ) {
    self.plan = plan
    self.runtime = runtime
    self.deliver = deliver
    super.init(priority: plan.priority)
  }

  override func run() async {
    await self.plan.execute(runtime: self.runtime, deliver: self.deliver)
  }

  override func abandon() {
    self.plan.abandon(runtime: self.runtime)
  }
}

/// A job of one `.run` effect, the common case: it runs the body with no plan to switch on, so
/// a suspended effect keeps one frame fewer.
///
/// Safety: immutable, and every stored property is `Sendable`.
final class RunJob<Action: Sendable>: EffectJob, @unchecked Sendable {
  private let box: EffectBox
  private let operation: RunOperation<Action>
  private let runtime: EffectRuntime
  private let deliver: @Sendable (Action, EffectBox) async -> Void

  init(
    box: EffectBox,
    run: RunOperation<Action>,
    runtime: EffectRuntime,
    deliver: @escaping @Sendable (Action, EffectBox) async -> Void
  ) {
    self.box = box
    self.operation = run
    self.runtime = runtime
    self.deliver = deliver
    super.init(priority: run.priority)
  }

  override func run() async {
    await EffectPlan.executeRun(self.box, self.operation, runtime: self.runtime, deliver: self.deliver)
  }

  override func abandon() {
    self.runtime.abandon(self.box)
  }
}

// MARK: - Scheduling

/// Turns the effect a reducer returned into registered boxes, synchronous sends and jobs.
///
/// This is where the registration rule lives: every asynchronous unit gets its box (and its
/// cancellation identifiers) now, while the store is still processing the action, so a
/// `.cancel(id:)` processed later, even in the same `send`, reaches it before it can start.
@usableFromInline
struct EffectScheduler<Action: Sendable> {
  @usableFromInline let runtime: EffectRuntime
  let deliver: @Sendable (Action, EffectBox) async -> Void

  /// The lifetime effects join: the sent action's, created on the first effect.
  @usableFromInline var lifetime: EffectLifetime?

  /// Jobs to hand to the root task once the whole `send` has been processed.
  @usableFromInline var jobs: [EffectJob] = []

  @usableFromInline
  init(runtime: EffectRuntime, deliver: @escaping @Sendable (Action, EffectBox) async -> Void) {
    self.runtime = runtime
    self.deliver = deliver
  }

  private mutating func currentLifetime() -> EffectLifetime {
    if let lifetime = self.lifetime { return lifetime }
    let lifetime = EffectLifetime(runtime: self.runtime)
    self.lifetime = lifetime
    return lifetime
  }

  /// Schedules `effect`: synchronous sends go to `enqueue` in order (with a box when they are
  /// cancellable), cancellations happen now, asynchronous work becomes jobs.
  @usableFromInline
  mutating func schedule(
    _ effect: Effect<Action>,
    keys: [CancelKey] = [],
    enqueue: (Action, EffectBox?) -> Void
  ) {
    switch effect.operation {
    case .none:
      return

    case .send(let action):
      if keys.isEmpty {
        enqueue(action, nil)
      } else {
        enqueue(action, self.runtime.makeBox(keys: keys, lifetime: self.currentLifetime()))
      }

    case .run(let run):
      let box = self.runtime.makeBox(keys: keys, lifetime: self.currentLifetime())
      self.append(.run(box, run))

    case .cancel(let cancelled):
      self.runtime.cancel(cancelled)

    case .cancellable(let key, let cancelInFlight, let inner):
      if cancelInFlight {
        self.runtime.cancel([key])
      }
      self.schedule(inner, keys: keys + [key], enqueue: enqueue)

    case .merge(let effects):
      for effect in effects {
        self.schedule(effect, keys: keys, enqueue: enqueue)
      }

    case .concatenate(let effects):
      // Leading parts with no asynchronous work run now, in order; from the first asynchronous
      // part on, everything runs in order in one job.
      var index = effects.startIndex
      while index < effects.endIndex, !effects[index].hasAsynchronousWork {
        self.schedule(effects[index], keys: keys, enqueue: enqueue)
        index += 1
      }
      guard index < effects.endIndex else { return }
      let steps = effects[index...].compactMap { self.plan($0, keys: keys) }
      switch steps.count {
      case 0: return
      case 1: self.append(steps[0])
      default: self.append(.concatenate(steps))
      }

    case .deferred(let make):
      self.schedule(make(self.runtime), keys: keys, enqueue: enqueue)
    }
  }

  /// Registers every unit of `effect` for running later, in order, inside a job.
  private mutating func plan(_ effect: Effect<Action>, keys: [CancelKey]) -> EffectPlan<Action>? {
    switch effect.operation {
    case .none:
      return nil
    case .send(let action):
      return .send(self.runtime.makeBox(keys: keys, lifetime: self.currentLifetime()), action)
    case .run(let run):
      return .run(self.runtime.makeBox(keys: keys, lifetime: self.currentLifetime()), run)
    case .cancel(let cancelled):
      return .cancel(cancelled)
    case .cancellable(let key, let cancelInFlight, let inner):
      if cancelInFlight {
        self.runtime.cancel([key])
      }
      return self.plan(inner, keys: keys + [key])
    case .merge(let effects):
      let plans = effects.compactMap { self.plan($0, keys: keys) }
      return plans.isEmpty ? nil : .merge(plans)
    case .concatenate(let effects):
      let plans = effects.compactMap { self.plan($0, keys: keys) }
      return plans.isEmpty ? nil : .concatenate(plans)
    case .deferred(let make):
      return self.plan(make(self.runtime), keys: keys)
    }
  }

  private mutating func append(_ plan: EffectPlan<Action>) {
    if case .run(let box, let run) = plan {
      self.jobs.append(RunJob(box: box, run: run, runtime: self.runtime, deliver: self.deliver))
    } else {
      self.jobs.append(PlanJob(plan: plan, runtime: self.runtime, deliver: self.deliver))
    }
  }

  /// Hands the collected jobs to the root task and returns the lifetime they joined.
  @inlinable
  mutating func submit() -> EffectLifetime? {
    if !self.jobs.isEmpty {
      self.runtime.submit(&self.jobs)
    }
    defer { self.lifetime = nil }
    return self.lifetime
  }
}

extension Effect {
  /// Whether running this effect needs a task (it contains a `.run`).
  var hasAsynchronousWork: Bool {
    switch self.operation {
    case .none, .send, .cancel:
      return false
    case .run, .deferred:
      return true
    case .cancellable(_, _, let inner):
      return inner.hasAsynchronousWork
    case .merge(let effects), .concatenate(let effects):
      return effects.contains { $0.hasAsynchronousWork }
    }
  }
}

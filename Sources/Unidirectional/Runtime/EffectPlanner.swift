/// One registration step a reducer's effect asks for, applied in order under the supervisor's lock
/// (``EffectSupervisor/apply(_:jobs:)``).
@usableFromInline enum PlanStep: Sendable {
  /// A unit of work, registered under its cancellation identifiers before anything runs.
  case register(any EffectUnit, CancelKeys)
  /// Cancels the units registered under these identifiers (so far, in this order).
  case cancel(CancelKeys)
}

/// Turns the effect a reducer returned into registration steps, synchronous sends and jobs.
///
/// This is where the registration rule lives: every asynchronous unit gets its token (and its
/// cancellation identifiers) while the store is still processing the action, so a `.cancel(id:)`
/// processed later, even in the same `send`, reaches it before it can start. It runs on the store's
/// executor and touches no lock; the caller applies what it collected.
@usableFromInline
struct EffectPlanner<Action: Sendable> {
  /// Registrations and cancellations, in the order the effect named them.
  @usableFromInline var steps: [PlanStep] = []
  /// Jobs to start a task for.
  @usableFromInline var jobs: [any EffectJob] = []
  /// Timers to arm once registered.
  @usableFromInline var timers: [TimerEntry] = []
  /// The lifetime new units join (its first unit): the sent action's (its first unit once there is
  /// one), or the lifetime of the effect that delivered the action being processed.
  @usableFromInline var lifetime: (any EffectUnit)?
  /// The unit whose effect delivered the action being processed, while it is processed: its
  /// lifetime is the one new units join.
  ///
  /// Unowned: the delivering effect is suspended in the delivery, holding the unit, for as long as
  /// this is set.
  @usableFromInline unowned(unsafe) var source: (any EffectUnit)?
  // NB: the small fields last, together: each word of padding is part of every store's core.
  /// Whether timers run as sleeping tasks (outside a store, where nothing arms them).
  @usableFromInline var lowersTimers = false
  /// Whether a ``Effect/cancelledOnShutdown()`` mark encloses the effect being planned: units
  /// registered meanwhile carry ``UnitFlags/cancelledOnShutdown``.
  @usableFromInline var isMarkingForShutdown = false
  /// Whether the arrays are the thread's ``PlanScratch`` (between ``borrowScratch()`` and
  /// ``returnScratch()``).
  @usableFromInline var holdsScratch = false

  /// The lifetime new units join, found when the first one does.
  @usableFromInline mutating func joinedLifetime() -> (any EffectUnit)? {
    if self.lifetime == nil, let source = self.source {
      self.lifetime = source.lifetime
    }
    return self.lifetime
  }

  @usableFromInline init() {}

  /// Whether anything was collected since the last apply.
  @inlinable var isEmpty: Bool {
    self.steps.isEmpty && self.jobs.isEmpty && self.timers.isEmpty
  }

  /// Plans `effect`: synchronous sends go to `enqueue` in order (with a token when they are
  /// cancellable), cancellations and registrations become steps, asynchronous work jobs.
  ///
  /// NB: inlinable, so it is specialized for the feature's `Action` in the store's specialized
  /// code: unspecialized, a re-armed timer spent much of its time looking up generic metadata.
  /// The rarer cases stay behind ``planOrdered(_:keys:delivery:supervisor:action:enqueue:)``.
  @inlinable
  mutating func plan(
    _ effect: Effect<Action>,
    keys: CancelKeys = CancelKeys(),
    delivery: EffectDelivery<Action>,
    supervisor: EffectSupervisor,
    action: Action? = nil,
    enqueue: (Action, EffectToken?) -> Void
  ) {
    switch effect.operation {
    case .none:
      return

    case .send(let action):
      if keys.isEmpty {
        enqueue(action, nil)
      } else {
        enqueue(action, self.register(keys))
      }

    case .run(let operation):
      let job = RunJob.make(
        lifetime: self.joinedLifetime(),
        operation: operation,
        delivery: delivery,
        action: action
      )
      // NB: one with no identifier is listed: it starts without the supervisor's lock, and
      // stays out of the state machine's map of records (`RunUnit`).
      if keys.isEmpty { job.insertFlags(UnitFlags.startsUnlocked) }
      self.register(job, keys)
      self.jobs.append(job)

    case .timer(let timer, let keyed, let marked):
      self.planTimer(
        timer,
        keyed: keyed,
        marked: marked,
        keys: keys,
        delivery: delivery,
        supervisor: supervisor,
        action: action
      )

    case .cancel(let cancelled):
      self.steps.append(.cancel(CancelKeys(cancelled)))

    case .cancellable(let key, let cancelInFlight, let inner):
      if cancelInFlight {
        self.steps.append(.cancel(CancelKeys(key)))
      }
      self.plan(
        inner,
        keys: keys.appending(key),
        delivery: delivery,
        supervisor: supervisor,
        action: action,
        enqueue: enqueue
      )

    case .merge(let effects):
      for effect in effects {
        self.plan(
          effect,
          keys: keys,
          delivery: delivery,
          supervisor: supervisor,
          action: action,
          enqueue: enqueue
        )
      }

    case .cancelledOnShutdown(let inner):
      // NB: the store's executor begins draining too, so this cannot race it.
      guard !supervisor.hasBegunDraining else { return }
      let wasMarking = self.isMarkingForShutdown
      self.isMarkingForShutdown = true
      self.plan(
        inner,
        keys: keys,
        delivery: delivery,
        supervisor: supervisor,
        action: action,
        enqueue: enqueue
      )
      self.isMarkingForShutdown = wasMarking

    case .deferred(let make):
      // NB: here, not in `planOrdered`: planned unspecialized, a debounce restart (a deferred
      // effect) spent much of its time looking up generic metadata.
      // The decision reads per-store state; the cancellations named before it must be in.
      if !self.steps.isEmpty { supervisor.applySteps(&self.steps) }
      self.plan(
        make(supervisor),
        keys: keys,
        delivery: delivery,
        supervisor: supervisor,
        action: action,
        enqueue: enqueue
      )

    case .concatenate, .queued:
      self.planOrdered(
        effect,
        keys: keys,
        delivery: delivery,
        supervisor: supervisor,
        action: action,
        enqueue: enqueue
      )
    }
  }

  /// Plans `effect` as ``plan(_:keys:delivery:supervisor:action:enqueue:)`` does, leaving `.none`
  /// in its place: a timer's payload that nothing else holds becomes its record
  /// (``TimerOperation/record(of:lifetime:host:delivery:supervisor:)``) instead of being copied.
  ///
  /// NB: the operation is moved out of the effect and the effect cleared before the timer is
  /// planned, so that the planner holds the only reference when the reducer kept none: a plain
  /// `let` effect handed down was copied along the way (a retain per level).
  @inlinable
  mutating func plan(
    taking effect: inout Effect<Action>,
    delivery: EffectDelivery<Action>,
    supervisor: EffectSupervisor,
    action: Action,
    enqueue: (Action, EffectToken?) -> Void
  ) {
    guard case .timer(let timer, let keyed, let marked) = effect.operation else {
      self.plan(
        effect,
        delivery: delivery,
        supervisor: supervisor,
        action: action,
        enqueue: enqueue
      )
      return
    }
    effect.operation = .none
    self.planTimer(
      timer,
      keyed: keyed,
      marked: marked,
      keys: CancelKeys(),
      delivery: delivery,
      supervisor: supervisor,
      action: action
    )
  }

  /// Re-arms the armed timer under `key` in place with `timer`'s deadline and action, when it can
  /// (``EffectSupervisor/rearmInPlace(_:flags:host:deadline:lifetime:update:)``): a debounced
  /// idle timer restarted by every request then cancels nothing and registers nothing.
  ///
  /// The cancellations and registrations planned before it are applied first: they may concern
  /// `key`.
  @inlinable mutating func rearmInPlace(
    _ timer: TimerOperation<Action>,
    key: CancelKey,
    host: any TimerHost,
    supervisor: EffectSupervisor
  ) -> Bool {
    if !self.steps.isEmpty { supervisor.applySteps(&self.steps) }
    let (action, run) = (timer.action, timer.run)
    let joined = supervisor.rearmInPlace(
      key,
      flags: self.isMarkingForShutdown ? UnitFlags.cancelledOnShutdown : 0,
      host: host,
      deadline: host.deadline(after: timer.delay),
      lifetime: self.joinedLifetime()
    ) { entry in
      // NB: the exact class: a repeating timer, another action type's, or one that sends where
      // this one runs an effect (or the other way round), is not re-armed here.
      let type = ObjectIdentifier(type(of: entry))
      if let run {
        guard type == ObjectIdentifier(RunTimerOperation<Action>.self) else { return false }
        unsafeDowncast(entry, to: RunTimerOperation<Action>.self).payload = run
      } else {
        guard type == ObjectIdentifier(SendTimerOperation<Action>.self) else { return false }
        unsafeDowncast(entry, to: SendTimerOperation<Action>.self).payload =
          action.unsafelyUnwrapped
      }
      return true
    }
    guard let joined else { return false }
    if self.lifetime == nil { self.lifetime = joined }
    return true
  }

  /// Plans a timer: re-armed in place when it can be, else a record for its clock's host (the
  /// effect's payload itself when nothing else holds it), or a sleeping task on a clock with none.
  ///
  /// Marked, it plans as `.cancelledOnShutdown` around it: refused once a graceful shutdown has
  /// begun, and its unit carries the mark.
  @inlinable
  mutating func planTimer(
    _ timer: consuming TimerOperation<Action>,
    keyed: Bool,
    marked: Bool,
    keys: CancelKeys,
    delivery: EffectDelivery<Action>,
    supervisor: EffectSupervisor,
    action: Action?
  ) {
    let marks = marked && !self.isMarkingForShutdown
    if marks {
      guard !supervisor.hasBegunDraining else { return }
      self.isMarkingForShutdown = true
    }
    defer { if marks { self.isMarkingForShutdown = false } }
    let host = timer.host
    let queues = host.queuesTimers && !self.lowersTimers
    if queues, keyed, keys.isEmpty, timer.cancelInFlight, timer.interval.isZeroLength,
      let key = timer.cancelKey,
      self.rearmInPlace(timer, key: key, host: host, supervisor: supervisor)
    {
      return
    }
    let keys = self.foldedKeys(of: timer, keyed: keyed, into: keys)
    guard queues else {
      self.planSleepingTimer(timer, keys: keys, delivery: delivery, action: action)
      return
    }
    let unit = TimerOperation.record(
      of: timer,
      lifetime: self.joinedLifetime(),
      host: host,
      delivery: delivery,
      supervisor: supervisor
    )
    self.register(unit, keys)
    self.timers.append(unit)
  }

  /// `keys` and the identifier a `.cancellable` folded into `timer` (when it applies), after
  /// planning the cancellation it asks for.
  @usableFromInline mutating func foldedKeys(
    of timer: TimerOperation<Action>,
    keyed: Bool,
    into keys: CancelKeys
  ) -> CancelKeys {
    guard keyed, let key = timer.cancelKey else { return keys }
    if timer.cancelInFlight { self.steps.append(.cancel(CancelKeys(key))) }
    return keys.appending(key)
  }

  /// A timer that runs as a task sleeping on its clock (a clock with no timer queue).
  @usableFromInline
  mutating func planSleepingTimer(
    _ timer: TimerOperation<Action>,
    keys: CancelKeys,
    delivery: EffectDelivery<Action>,
    action: Action?
  ) {
    let job = RunJob.make(
      lifetime: self.joinedLifetime(),
      operation: timer.asRun,
      delivery: delivery,
      action: action
    )
    self.register(job, keys)
    self.jobs.append(job)
  }

  /// Plans a concatenation or a queued effect.
  @usableFromInline
  mutating func planOrdered(
    _ effect: Effect<Action>,
    keys: CancelKeys,
    delivery: EffectDelivery<Action>,
    supervisor: EffectSupervisor,
    action: Action?,
    enqueue: (Action, EffectToken?) -> Void
  ) {
    switch effect.operation {
    case .concatenate(let effects):
      // Leading parts with no asynchronous work run now, in order; from the first asynchronous
      // part on, everything runs in order in one job.
      var index = effects.startIndex
      while index < effects.endIndex, !effects[index].hasAsynchronousWork {
        self.plan(
          effects[index],
          keys: keys,
          delivery: delivery,
          supervisor: supervisor,
          action: action,
          enqueue: enqueue
        )
        index += 1
      }
      guard index < effects.endIndex else { return }
      let plans = effects[index...].compactMap {
        self.plan($0, keys: keys, delivery: delivery, supervisor: supervisor, action: action)
      }
      switch plans.count {
      case 0: return
      case 1: self.jobs.append(PlanJob(plan: plans[0], delivery: delivery))
      default: self.jobs.append(PlanJob(plan: .concatenate(plans), delivery: delivery))
      }

    case .queued(let key, let inner):
      guard
        let plan = self.plan(
          inner,
          keys: keys,
          delivery: delivery,
          supervisor: supervisor,
          action: action
        )
      else { return }
      let ticket = supervisor.enqueue(on: key)
      self.jobs.append(PlanJob(plan: .queued(ticket, plan), delivery: delivery))

    default:
      self.plan(
        effect,
        keys: keys,
        delivery: delivery,
        supervisor: supervisor,
        action: action,
        enqueue: enqueue
      )
    }
  }

  /// Registers every unit of `effect` for running later, in order, inside a job.
  private mutating func plan(
    _ effect: Effect<Action>,
    keys: CancelKeys,
    delivery: EffectDelivery<Action>,
    supervisor: EffectSupervisor,
    action: Action?
  ) -> EffectPlan<Action>? {
    switch effect.operation {
    case .none:
      return nil
    case .send(let action):
      return .send(self.register(keys), action)
    case .run(let operation):
      let job = RunJob.make(
        lifetime: self.joinedLifetime(),
        operation: operation,
        delivery: delivery,
        action: action
      )
      self.register(job, keys)
      return .run(job)
    case .timer(let timer, let keyed, let marked):
      if marked && !self.isMarkingForShutdown {
        guard !supervisor.hasBegunDraining else { return nil }
        self.isMarkingForShutdown = true
        defer { self.isMarkingForShutdown = false }
        return self.plan(
          Effect(operation: .timer(timer, keyed: keyed, marked: false)),
          keys: keys,
          delivery: delivery,
          supervisor: supervisor,
          action: action
        )
      }
      let keys = self.foldedKeys(of: timer, keyed: keyed, into: keys)
      // NB: inside an ordered step the timer waits for its turn: a task that sleeps.
      let job = RunJob.make(
        lifetime: self.joinedLifetime(),
        operation: timer.asRun,
        delivery: delivery,
        action: action
      )
      self.register(job, keys)
      return .run(job)
    case .cancel(let cancelled):
      return .cancel(cancelled)
    case .cancellable(let key, let cancelInFlight, let inner):
      if cancelInFlight {
        self.steps.append(.cancel(CancelKeys(key)))
      }
      return self.plan(
        inner,
        keys: keys.appending(key),
        delivery: delivery,
        supervisor: supervisor,
        action: action
      )
    case .merge(let effects):
      let plans = effects.compactMap {
        self.plan($0, keys: keys, delivery: delivery, supervisor: supervisor, action: action)
      }
      return plans.isEmpty ? nil : .merge(plans)
    case .concatenate(let effects):
      let plans = effects.compactMap {
        self.plan($0, keys: keys, delivery: delivery, supervisor: supervisor, action: action)
      }
      return plans.isEmpty ? nil : .concatenate(plans)
    case .queued(let key, let inner):
      guard
        let plan = self.plan(
          inner,
          keys: keys,
          delivery: delivery,
          supervisor: supervisor,
          action: action
        )
      else { return nil }
      return .queued(supervisor.enqueue(on: key), plan)
    case .cancelledOnShutdown(let inner):
      guard !supervisor.hasBegunDraining else { return nil }
      let wasMarking = self.isMarkingForShutdown
      self.isMarkingForShutdown = true
      defer { self.isMarkingForShutdown = wasMarking }
      return self.plan(
        inner,
        keys: keys,
        delivery: delivery,
        supervisor: supervisor,
        action: action
      )
    case .deferred(let make):
      if !self.steps.isEmpty { supervisor.applySteps(&self.steps) }
      return self.plan(
        make(supervisor),
        keys: keys,
        delivery: delivery,
        supervisor: supervisor,
        action: action
      )
    }
  }

  /// A new token unit, registered under `keys`.
  @usableFromInline mutating func register(_ keys: CancelKeys) -> EffectToken {
    let token = EffectToken(lifetime: self.joinedLifetime())
    self.register(token, keys)
    return token
  }

  /// Registers `unit` under `keys`; the first unit of a send stands for its lifetime.
  @usableFromInline mutating func register(_ unit: any EffectUnit, _ keys: CancelKeys) {
    if self.isMarkingForShutdown { unit.insertFlags(UnitFlags.cancelledOnShutdown) }
    if self.lifetime == nil {
      self.lifetime = unit
    }
    self.steps.append(.register(unit, keys))
  }
}

extension Effect {
  /// Whether running this effect needs a task (it contains a `.run`).
  var hasAsynchronousWork: Bool {
    switch self.operation {
    case .none, .send, .cancel:
      return false
    case .run, .timer, .deferred, .queued:
      // NB: a queued effect waits for its turn even when it only sends (never `.none`, which
      // `queued(id:)` returns as is).
      return true
    case .cancellable(_, _, let inner), .cancelledOnShutdown(let inner):
      return inner.hasAsynchronousWork
    case .merge(let effects), .concatenate(let effects):
      return effects.contains { $0.hasAsynchronousWork }
    }
  }
}

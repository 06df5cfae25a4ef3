extension Effect {
  /// Delays this effect by `duration`; a newer debounced effect with the same `id` replaces a
  /// pending one, so only the last of a burst runs.
  ///
  /// ```swift
  /// case .searchChanged(let query):
  ///   state.query = query
  ///   return .run { send in await send(.results(try await api.search(query))) }
  ///     .debounce(id: CancelID.search, for: .milliseconds(300), clock: clock)
  /// ```
  ///
  /// The effect is cancellable with `id` (``cancel(id:)``), before and after the delay.
  ///
  /// On a clock the runtime knows (`ContinuousClock`, `SuspendingClock`, ``TestClock``), a
  /// debounced `.send` or `.run` waits as a record in the clock's timer queue, not as a task: a
  /// newer debounced effect re-arms it in place, and a `.run` starts its task at the deadline.
  /// As with `cancelInFlight: true`, the newest debounced send's ``StoreTask`` covers the effect
  /// and the ones it replaced finish. On another clock the wait is one sleeping task per `id`,
  /// whose deadline newer effects move, and the first send's task covers it.
  @inlinable
  public func debounce<ID: Hashable & Sendable>(
    id: ID,
    for duration: Duration,
    clock: any Clock<Duration>
  ) -> Self {
    let body: @concurrent @Sendable (Send<Action>) async -> Void
    let priority: TaskPriority?
    let host = timerHost(for: clock)
    switch self.operation {
    case .none:
      // NB: a debounced `.none` still replaces the pending effect, like any newer one.
      return .cancel(id: id)
    case .run(let run):
      if let host {
        // A timer record that starts the effect at its deadline; a newer one re-arms it in place.
        return Self(
          operation: .timer(
            RunTimerOperation(run: run, delay: duration, host: host),
            keyed: false,
            marked: false
          )
        )
        .cancellable(id: id, cancelInFlight: true)
      }
      body = run.body
      priority = run.priority
    case .send(let action):
      if let host {
        // A timer record that sends the action at its deadline; a newer one re-arms it in place.
        // NB: made here with the host found above: `.send(_:after:clock:)` looked it up again.
        return Self(
          operation: .timer(
            SendTimerOperation(action: action, delay: duration, host: host),
            keyed: false,
            marked: false
          )
        )
        .cancellable(id: id, cancelInFlight: true)
      }
      body = { send in await send(action) }
      priority = nil
    default:
      return Effect.concatenate(.run { _ in try await clock.sleep(for: duration) }, self)
        .cancellable(id: id, cancelInFlight: true)
    }
    // A clock with no timer queue: one sleeping task per id, whose deadline and body a newer
    // debounced effect replaces.
    let key = CancelKey(id)
    // NB: inlinable, so a restart (the common case: a new deadline and body for the pending
    // timer) is specialized for the feature's action; planned generically, it looked up type
    // metadata.
    return Self(
      operation: .deferred { supervisor in
        let deadline = debounceDeadline(on: clock, after: duration)
        if supervisor.rearmDebounce(key, deadline: deadline, body: body) {
          return .none
        }
        return debounced(
          body,
          priority: priority,
          key: key,
          duration: duration,
          clock: clock,
          supervisor: supervisor
        )
      }
    )
  }

  /// Lets this effect run at most once per `interval` for `id`.
  ///
  /// The first effect of a quiet period runs at once. Effects arriving within `interval` of the
  /// last one that ran are held back: with `latest: true` the newest of them runs when the
  /// interval ends; with `latest: false` the first of them does, and the rest are dropped.
  /// Throttling state is kept per root store.
  ///
  /// As in the Composable Architecture, the effect is cancellable with `id` (``cancel(id:)``),
  /// held or running, and one that runs at once cancels the one before it if that still runs. A
  /// held effect that was cancelled holds nothing back once its interval is a whole interval
  /// past. On a clock the runtime knows, a held `.send` or `.run` waits as a timer record.
  ///
  /// ```swift
  /// case .scrolled(let offset):
  ///   return .send(.loadMore(offset))
  ///     .throttle(id: CancelID.load, for: .seconds(1), clock: clock, latest: true)
  /// ```
  public func throttle<ID: Hashable & Sendable>(
    id: ID,
    for interval: Duration,
    clock: any Clock<Duration>,
    latest: Bool
  ) -> Self {
    if case .none = self.operation { return .none }
    let key = CancelKey(id)
    let effect = self
    return Self(
      operation: .deferred { supervisor in
        throttled(
          effect,
          key: key,
          interval: interval,
          clock: clock,
          latest: latest,
          supervisor: supervisor
        )
      }
    )
  }
}

/// The instant `duration` from now on `clock`, as the debounce's slot keeps it.
@usableFromInline
func debounceDeadline(on clock: any Clock<Duration>, after duration: Duration) -> any Sendable {
  func deadline<C: Clock<Duration>>(_ clock: C) -> any Sendable {
    clock.now.advanced(by: duration)
  }
  return deadline(clock)
}

/// A debounce with no pending timer to re-arm: records a new one and returns its sleeping task.
///
/// One sleeping task per id, not per debounced effect (a cancelled sleep keeps its memory until
/// its deadline): restarts move the deadline of the pending one.
@usableFromInline
func debounced<Action: Sendable, C: Clock<Duration>>(
  _ body: @escaping @concurrent @Sendable (Send<Action>) async -> Void,
  priority: TaskPriority?,
  key: CancelKey,
  duration: Duration,
  clock: C,
  supervisor: EffectSupervisor
) -> Effect<Action> {
  // NB: a deadline of its own (not the restart check's): the slot and the task must agree on it.
  let deadline = clock.now.advanced(by: duration)
  let generation = supervisor.armDebounce(key, deadline: deadline, body: body)
  let timer = RunOperation<Action>(priority: priority) { send in
    var target = deadline
    while true {
      do {
        try await clock.sleep(until: target, tolerance: nil)
      } catch {
        supervisor.endDebounce(key, generation: generation)
        return
      }
      switch supervisor.wakeDebounce(
        key,
        generation: generation,
        sleptUntil: { $0 as? C.Instant == target }
      ) {
      case .sleep(let next):
        guard let next = next as? C.Instant else { return }
        target = next
      case .fire(let latest):
        if let latest = latest as? @concurrent @Sendable (Send<Action>) async -> Void {
          await latest(send)
        }
        supervisor.endDebounce(key, generation: generation)
        return
      case .end:
        return
      }
    }
  }
  return Effect(operation: .cancellable(key, cancelInFlight: false, Effect(operation: .run(timer))))
}

extension Effect {
  /// This effect as the body of one task, when it is a `.send` or a `.run`.
  var runOperation: RunOperation<Action>? {
    switch self.operation {
    case .send(let action):
      return RunOperation(priority: nil) { send in await send(action) }
    case .run(let run):
      return run
    default:
      return nil
    }
  }
}

/// The cancellation id of a throttled effect held back until its interval ends.
private struct ThrottleDelayID: Hashable, Sendable {
  let key: CancelKey
}

/// Decides, on the store, whether a throttled effect runs now, later, or not at all.
private func throttled<Action: Sendable, C: Clock<Duration>>(
  _ effect: Effect<Action>,
  key: CancelKey,
  interval: Duration,
  clock: C,
  latest: Bool,
  supervisor: EffectSupervisor
) -> Effect<Action> {
  let now = clock.now
  let decision = supervisor.withThrottleState(for: key) { state -> ThrottleDecision in
    state.clock = clock
    state.interval = interval
    guard let last = state.lastRun as? C.Instant else {
      state.lastRun = now
      state.isHolding = false
      return .runNow
    }
    let elapsed = last.duration(to: now)
    if state.isHolding && elapsed >= interval * 2 {
      // The held effect would have run a whole interval ago: it was cancelled (its id, its
      // send's task). Without this, a cancelled hold would drop every later effect.
      state.isHolding = false
    }
    if !state.isHolding && elapsed >= interval {
      state.lastRun = now
      return .runNow
    }
    if state.isHolding && !latest {
      return .drop
    }
    state.isHolding = true
    return .hold(max(.zero, interval - elapsed))
  }
  let wait: Duration
  switch decision {
  case .runNow:
    // NB: as in the Composable Architecture, a throttled effect is cancellable with `id`, and
    // one that runs cancels the one before it if that is still running.
    return Effect(operation: .cancellable(key, cancelInFlight: true, effect))
  case .drop: return .none
  case .hold(let duration): wait = duration
  }
  let delayID = ThrottleDelayID(key: key)
  if let host = timerHost(for: clock), let held = effect.runOperation {
    // A timer record until the interval ends, then the held effect as a task of its own.
    let body = held.body
    let run = RunOperation<Action>(priority: held.priority) { send in
      let ranAt = clock.now
      supervisor.withThrottleState(for: key) { state in
        state.lastRun = ranAt
        state.isHolding = false
      }
      await body(send)
    }
    let held = Effect(
      operation: .timer(
        RunTimerOperation(run: run, delay: wait, host: host),
        keyed: false,
        marked: false
      )
    )
    .cancellable(id: delayID, cancelInFlight: latest)
    return Effect(operation: .cancellable(key, cancelInFlight: false, held))
  }
  let held = Effect.concatenate(
    .run { _ in
      try await clock.sleep(for: wait)
      let ranAt = clock.now
      supervisor.withThrottleState(for: key) { state in
        state.lastRun = ranAt
        state.isHolding = false
      }
    },
    effect
  )
  .cancellable(id: delayID, cancelInFlight: latest)
  return Effect(operation: .cancellable(key, cancelInFlight: false, held))
}

private enum ThrottleDecision {
  case runNow
  case hold(Duration)
  case drop
}

/// What a store remembers about one throttle id.
struct ThrottleState: Sendable {
  /// When the last effect ran, on the throttle's clock (`()` before the first).
  var lastRun: any Sendable
  /// Whether an effect is held back until the interval ends.
  var isHolding: Bool
  /// The throttle's clock and interval, to tell when the entry has expired.
  var clock: (any Clock<Duration>)?
  var interval: Duration = .zero

  /// Whether the interval has passed with nothing held back: the entry then decides nothing
  /// an absent one would not.
  var isExpired: Bool {
    guard let clock = self.clock else { return true }
    // NB: a hold a whole interval overdue was cancelled (see `throttled`): it expires too.
    let span = self.isHolding ? self.interval * 2 : self.interval
    func expired<C: Clock<Duration>>(_ clock: C) -> Bool {
      guard let last = self.lastRun as? C.Instant else { return true }
      return last.duration(to: clock.now) >= span
    }
    return expired(clock)
  }
}

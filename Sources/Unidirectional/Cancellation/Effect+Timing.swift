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
  public func debounce<ID: Hashable & Sendable>(
    id: ID,
    for duration: Duration,
    clock: any Clock<Duration>
  ) -> Self {
    if case .none = self.operation {
      // NB: a debounced `.none` still replaces the pending effect, like any newer one.
      return .cancel(id: id)
    }
    let delayed: Self
    switch self.operation {
    case .run(let run):
      // One task: sleep, then the body (no concatenation machinery for the common case).
      let body = run.body
      delayed = Self(
        operation: .run(
          RunOperation(priority: run.priority) { send in
            do {
              try await clock.sleep(for: duration)
            } catch {
              return
            }
            await body(send)
          }
        )
      )
    case .send(let action):
      delayed = .run { send in
        try await clock.sleep(for: duration)
        await send(action)
      }
    default:
      delayed = .concatenate(.run { _ in try await clock.sleep(for: duration) }, self)
    }
    return delayed.cancellable(id: id, cancelInFlight: true)
  }

  /// Lets this effect run at most once per `interval` for `id`.
  ///
  /// The first effect of a quiet period runs at once. Effects arriving within `interval` of the
  /// last one that ran are held back: with `latest: true` the newest of them runs when the
  /// interval ends; with `latest: false` the first of them does, and the rest are dropped.
  /// Throttling state is kept per root store.
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
    guard let last = state.lastRun as? C.Instant else {
      state = ThrottleState(lastRun: now, isHolding: false)
      return .runNow
    }
    let elapsed = last.duration(to: now)
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
  case .runNow: return effect
  case .drop: return .none
  case .hold(let duration): wait = duration
  }
  let delayID = ThrottleDelayID(key: key)
  return Effect.concatenate(
    .run { _ in
      try await clock.sleep(for: wait)
      let ranAt = clock.now
      supervisor.withThrottleState(for: key) { state in
        state = ThrottleState(lastRun: ranAt, isHolding: false)
      }
    },
    effect
  )
  .cancellable(id: delayID, cancelInFlight: latest)
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
}

import Synchronization

// MARK: - Timers

extension Effect {
  /// An effect that sends `action` once `delay` has passed on `clock`: an idle timeout, a retry, a
  /// reminder.
  ///
  /// An armed timer is a small record in its clock's timer queue, not a task: arming, re-arming
  /// and cancelling it start no task. Re-arming an idle timeout on every request is:
  ///
  /// ```swift
  /// case .request:
  ///   state.requests += 1
  ///   return .send(.idle, after: .seconds(300), clock: clock)
  ///     .cancellable(id: CancelID.idle, cancelInFlight: true)
  /// ```
  ///
  /// Each request moves the one armed record to its new deadline, and the request's
  /// ``StoreTask`` takes the timer over from the previous one's (which finishes), as if the old
  /// timer were cancelled and a new one armed.
  ///
  /// The timer is an effect of the action that returned it: ``StoreTask/finish(fileID:filePath:line:column:)`` waits for it
  /// to fire, and cancelling that task, `.cancel(id:)` or shutdown cancels it (then its action is
  /// never reduced). A graceful shutdown waits for it like any effect unless it is marked
  /// ``cancelledOnShutdown()``.
  ///
  /// - `ContinuousClock` and `SuspendingClock` timers share one timer queue per clock for the
  ///   whole process; a ``TestClock``'s fire when it is advanced past them, in order with its
  ///   sleepers (ties in the order they were armed). On any other clock the timer runs as a task
  ///   that sleeps on the clock.
  /// - A zero or negative `delay` fires at the clock's next opportunity (on a ``TestClock``, its
  ///   next advance).
  ///
  /// - Parameters:
  ///   - action: The action to send.
  ///   - delay: How long to wait, on `clock`, from when the reducer returned the effect.
  ///   - clock: The clock that measures `delay`.
  /// - Returns: An effect that sends `action` once, after `delay`.
  @inlinable
  public static func send(
    _ action: Action,
    after delay: Duration,
    clock: any Clock<Duration>
  ) -> Self {
    Self(
      operation: .timer(
        SendTimerOperation(action: action, delay: delay, interval: nil, clock: clock),
        keyed: false,
        marked: false
      )
    )
  }

  /// An effect that sends `action` every `interval` on `clock` until it is cancelled: a
  /// heartbeat, a poll.
  ///
  /// ```swift
  /// case .connected:
  ///   return .send(.heartbeat, every: .seconds(30), clock: clock)
  ///     .cancellable(id: CancelID.heartbeat, cancelInFlight: true)
  ///     .cancelledOnShutdown()
  /// ```
  ///
  /// The first action is sent one `interval` after the reducer returned the effect, the next one
  /// `interval` after that deadline, and so on (deadlines do not drift with the time the store
  /// takes to reduce). Like ``send(_:after:clock:)`` it is a record in its clock's timer queue,
  /// not a task, and it never finishes by itself: cancel it by id, through its ``StoreTask``, or
  /// by shutting the store down.
  ///
  /// An `interval` that is zero or negative is misuse: it would fire without end. It is reported
  /// as an issue at the call site and the effect does nothing.
  ///
  /// - Parameters:
  ///   - action: The action to send at every tick.
  ///   - interval: The time between ticks, on `clock`; must be positive.
  ///   - clock: The clock that measures `interval`.
  ///   - fileID: The file ID of the location issues are reported at (the caller's).
  ///   - filePath: The file path of that source location.
  ///   - line: The line of that source location.
  ///   - column: The column of that source location.
  /// - Returns: An effect that sends `action` every `interval`.
  public static func send(
    _ action: Action,
    every interval: Duration,
    clock: any Clock<Duration>,
    fileID: StaticString = #fileID,
    filePath: StaticString = #filePath,
    line: UInt = #line,
    column: UInt = #column
  ) -> Self {
    guard interval > .zero else {
      reportIssue(
        """
        'Effect.send(_:every:clock:)' was given an interval that is not positive.

          Interval:
            \(interval)
          Action:
            \(debugDescription(of: action))

        A timer with this interval would fire without end, so it was not started. Pass a \
        positive interval.
        """,
        fileID: "\(fileID)",
        filePath: "\(filePath)",
        line: Int(line),
        column: Int(column)
      )
      return .none
    }
    return Self(
      operation: .timer(
        SendTimerOperation(action: action, delay: interval, interval: interval, clock: clock),
        keyed: false,
        marked: false
      )
    )
  }
}

/// What ``Effect/send(_:after:clock:)`` and ``Effect/send(_:every:clock:)`` ask for: the action,
/// when, on which clock's timer queue, and the cancellation identifier the timer was made
/// cancellable with, if any.
///
/// A class, the effect's one allocation: the first `.cancellable(id:)` applied to it records its
/// identifier here instead of wrapping the timer in a box of its own. The effect it returns says
/// the identifier applies (``Effect/Operation/timer(_:keyed:)``); the effect it was applied to,
/// which shares this instance, does not.
// Safety: `cancelKey` and `cancelInFlight` are written once, by the one caller of `fold` that wins
// `claimed`, before the effect that reads them (`keyed: true`) exists; everything else is
// immutable.
@usableFromInline class TimerOperation<Action: Sendable>: @unchecked Sendable {
  /// The time until the first firing.
  @usableFromInline final let delay: Duration
  /// The time between firings; `nil` for a one-shot timer.
  @usableFromInline final let interval: Duration?
  final let clock: any Clock<Duration>
  /// The timer queue of `clock`, or `nil` when the timer runs as a sleeping task.
  @usableFromInline final let host: (any TimerHost)?
  /// Whether the timer starts an effect (a ``RunTimerOperation``) rather than sending an action
  /// (a ``SendTimerOperation``).
  @usableFromInline final let startsEffect: Bool
  /// Whether an identifier was folded in (``fold(_:cancelInFlight:into:)``).
  private let claimed = Atomic(false)
  /// The identifier of the innermost `.cancellable(id:cancelInFlight:)`, folded in; it applies
  /// only to an effect made with `keyed: true`.
  ///
  /// NB: `@exclusivity(unchecked)`, like the timer record's fields: the run-time access checks
  /// on these two were ~8% of a re-arm; the Safety note above says who writes them when.
  @usableFromInline @exclusivity(unchecked) final private(set) var cancelKey: CancelKey?
  /// Whether that `.cancellable` cancels in-flight effects first.
  @usableFromInline @exclusivity(unchecked) final private(set) var cancelInFlight = false

  @usableFromInline
  init(
    delay: Duration,
    interval: Duration?,
    clock: any Clock<Duration>,
    host: (any TimerHost)?,
    startsEffect: Bool,
    cancelKey: CancelKey? = nil,
    cancelInFlight: Bool = false
  ) {
    self.delay = delay
    self.interval = interval
    self.clock = clock
    self.host = host
    self.startsEffect = startsEffect
    self.cancelKey = cancelKey
    self.cancelInFlight = cancelInFlight
    if cancelKey != nil { self.claimed.store(true, ordering: .relaxed) }
  }

  /// The action the timer sends; `nil` when it starts ``run`` instead.
  ///
  /// NB: the payload is a subclass's, not an `Action?` here: the optional's metadata was looked up
  /// at run time in every deinit, and an enum of both payloads was copied through runtime
  /// witnesses (a seventh of a re-arm, together).
  @inlinable final var action: Action? {
    self.startsEffect ? nil : unsafeDowncast(self, to: SendTimerOperation<Action>.self).payload
  }

  /// The effect the timer starts at its deadline (a debounced `.run`); `nil` when it sends.
  @inlinable final var run: RunOperation<Action>? {
    self.startsEffect ? unsafeDowncast(self, to: RunTimerOperation<Action>.self).payload : nil
  }

  /// The same timer, sending a transformed action; with its folded identifier when `keyed` (an
  /// unkeyed effect must not read it: another thread may be folding one in).
  final func map<NewAction: Sendable>(
    _ transform: @escaping @Sendable (Action) -> NewAction,
    keyed: Bool
  ) -> TimerOperation<NewAction> {
    let cancelKey = keyed ? self.cancelKey : nil
    let cancelInFlight = keyed && self.cancelInFlight
    if let run = self.run {
      return RunTimerOperation(
        run: run.map(transform),
        delay: self.delay,
        clock: self.clock,
        host: self.host,
        cancelKey: cancelKey,
        cancelInFlight: cancelInFlight
      )
    }
    return SendTimerOperation(
      action: transform(self.action.unsafelyUnwrapped),
      delay: self.delay,
      interval: self.interval,
      clock: self.clock,
      host: self.host,
      cancelKey: cancelKey,
      cancelInFlight: cancelInFlight
    )
  }
}

/// A timer that sends an action.
// Safety: as for `TimerOperation`; the field added here is immutable.
@usableFromInline
final class SendTimerOperation<Action: Sendable>: TimerOperation<Action>, @unchecked Sendable {
  @usableFromInline let payload: Action

  @usableFromInline
  init(
    action: Action,
    delay: Duration,
    interval: Duration?,
    clock: any Clock<Duration>,
    host: (any TimerHost)?,
    cancelKey: CancelKey? = nil,
    cancelInFlight: Bool = false
  ) {
    self.payload = action
    super.init(
      delay: delay,
      interval: interval,
      clock: clock,
      host: host,
      startsEffect: false,
      cancelKey: cancelKey,
      cancelInFlight: cancelInFlight
    )
  }

  @usableFromInline
  convenience init(action: Action, delay: Duration, interval: Duration?, clock: any Clock<Duration>)
  {
    self.init(
      action: action,
      delay: delay,
      interval: interval,
      clock: clock,
      host: timerHost(for: clock)
    )
  }
}

/// A one-shot timer that starts an effect at its deadline (a debounced `.run`).
// Safety: as for `TimerOperation`; the field added here is immutable.
@usableFromInline
final class RunTimerOperation<Action: Sendable>: TimerOperation<Action>, @unchecked Sendable {
  @usableFromInline let payload: RunOperation<Action>

  @usableFromInline
  init(
    run: RunOperation<Action>,
    delay: Duration,
    clock: any Clock<Duration>,
    host: (any TimerHost)?,
    cancelKey: CancelKey? = nil,
    cancelInFlight: Bool = false
  ) {
    self.payload = run
    super.init(
      delay: delay,
      interval: nil,
      clock: clock,
      host: host,
      startsEffect: true,
      cancelKey: cancelKey,
      cancelInFlight: cancelInFlight
    )
  }
}

extension TimerOperation {
  /// Records `key` as the timer's innermost identifier, if no identifier was folded in yet;
  /// `false` otherwise (then the caller wraps the timer).
  @usableFromInline func fold(_ key: CancelKey, cancelInFlight: Bool) -> Bool {
    guard
      self.claimed.compareExchange(expected: false, desired: true, ordering: .relaxed).exchanged
    else { return false }
    self.cancelKey = key
    self.cancelInFlight = cancelInFlight
    return true
  }

  /// The timer as a task that sleeps on the clock: for clocks with no timer queue, and where a
  /// timer runs inside an ordered step (a `concatenate` or a queued effect) or outside a store.
  var asRun: RunOperation<Action> {
    let delay = self.delay
    let interval = self.interval
    let clock = self.clock
    if let run = self.run {
      let body = run.body
      return RunOperation(priority: run.priority) { send in
        guard await sleep(for: delay, on: clock) else { return }
        await body(send)
      }
    }
    let action = self.action.unsafelyUnwrapped
    return RunOperation(priority: nil) { send in
      await sleepingTimer(action, delay: delay, interval: interval, clock: clock, send: send)
    }
  }
}

/// Sleeps for `delay` (none if it is not positive) on `clock`; `false` when cancelled.
private func sleep<C: Clock<Duration>>(for delay: Duration, on clock: C) async -> Bool {
  do {
    try await clock.sleep(until: clock.now.advanced(by: max(delay, .zero)), tolerance: nil)
    return true
  } catch {
    return false
  }
}

/// Sends `action` after `delay`, then every `interval` if there is one, sleeping on `clock`;
/// returns when cancelled.
private func sleepingTimer<Action: Sendable, C: Clock<Duration>>(
  _ action: Action,
  delay: Duration,
  interval: Duration?,
  clock: C,
  send: Send<Action>
) async {
  var deadline = clock.now.advanced(by: max(delay, .zero))
  while true {
    do {
      try await clock.sleep(until: deadline, tolerance: nil)
    } catch {
      return
    }
    await send(action)
    guard let interval else { return }
    deadline = deadline.advanced(by: interval)
  }
}

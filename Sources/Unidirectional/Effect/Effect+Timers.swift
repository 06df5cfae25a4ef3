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
  ///   whole process. Its task wakes on millisecond boundaries, so one wake-up fires every timer
  ///   due within the same millisecond: a timer fires up to 1 ms after its deadline (never
  ///   before), and 100,000 stores ticking once a second take about half the CPU they would with
  ///   a wake-up per deadline.
  /// - A ``TestClock``'s timers fire when it is advanced past them, in order with its sleepers
  ///   (ties in the order they were armed). On any other clock the timer runs as a task that
  ///   sleeps on the clock.
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
        SendTimerOperation(action: action, delay: delay, host: timerHostOrClock(for: clock)),
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
        RepeatingTimerOperation(
          action: action,
          interval: interval,
          host: timerHostOrClock(for: clock)
        ),
        keyed: false,
        marked: false
      )
    )
  }
}

extension TimerOperation {
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
        host: self.host,
        cancelKey: cancelKey,
        cancelInFlight: cancelInFlight
      )
    }
    let action = transform(self.action.unsafelyUnwrapped)
    if self.interval > .zero {
      return RepeatingTimerOperation(
        action: action,
        interval: self.interval,
        host: self.host,
        cancelKey: cancelKey,
        cancelInFlight: cancelInFlight
      )
    }
    return SendTimerOperation(
      action: action,
      delay: self.delay,
      host: self.host,
      cancelKey: cancelKey,
      cancelInFlight: cancelInFlight
    )
  }

  /// The timer as a task that sleeps on the clock: for clocks with no timer queue, and where a
  /// timer runs inside an ordered step (a `concatenate` or a queued effect) or outside a store.
  var asRun: RunOperation<Action> {
    let delay = self.delay
    let interval = self.interval > .zero ? self.interval : nil
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

extension Clock where Duration == Swift.Duration {
  /// A sequence that ticks every `interval` on this clock, without drift.
  ///
  /// Tick *k* is due at `start + k × interval`, where `start` is the clock's `now` when the
  /// iteration begins, however long the loop body takes; a late tick is delivered at once. Each
  /// element is the time since the start (`interval`, `2 × interval`, ...). The sequence ends
  /// when the iterating task is cancelled. Works on an existential `any Clock<Duration>`.
  ///
  /// ```swift
  /// return .run { [clock] send in
  ///   for await _ in clock.timer(interval: .seconds(1)) {
  ///     await send(.timerTick)
  ///   }
  /// }
  /// .cancellable(id: CancelID.timer, cancelInFlight: true)
  /// ```
  ///
  /// On `ContinuousClock` and `SuspendingClock` the timer waits between ticks as a record in the
  /// clock's timer queue, which `.send(after:)` timers share, not as a `Task.sleep`, and a tick
  /// comes up to 1 ms after its due time (the queue wakes on millisecond boundaries); on other
  /// clocks (a ``TestClock`` included, whose sleepers keep their order with its timers) it sleeps
  /// on the clock.
  ///
  /// - Parameter interval: The time between ticks.
  /// - Returns: An endless sequence of ticks.
  public func timer(interval: Duration) -> ClockTimer {
    if let host = timerHost(for: self), !(host is TestClock) {
      return ClockTimer { QueuedTimerDriver(host: host, interval: interval) }
    }
    return ClockTimer { TimerDriver(clock: self, interval: interval) }
  }
}

/// The ticks of `clock.timer(interval:)`: the elapsed time at each tick.
public struct ClockTimer: AsyncSequence, Sendable {
  /// The time since the timer started, at this tick.
  public typealias Element = Duration
  /// The timer ends instead of throwing.
  public typealias Failure = Never

  private let makeDriver: @Sendable () -> AnyTimerDriver

  init(makeDriver: @escaping @Sendable () -> AnyTimerDriver) {
    self.makeDriver = makeDriver
  }

  /// Creates an iterator; the timer starts with its first `next()`.
  public func makeAsyncIterator() -> Iterator {
    Iterator(driver: self.makeDriver())
  }

  /// Iterates the ticks.
  public struct Iterator: AsyncIteratorProtocol {
    let driver: AnyTimerDriver

    /// Waits for the next tick; `nil` once the task is cancelled.
    public mutating func next() async -> Duration? {
      await self.driver.next()
    }
  }
}

@available(*, unavailable)
extension ClockTimer.Iterator: Sendable {}

/// The type-erased state of one timer iteration.
class AnyTimerDriver {
  func next() async -> Duration? { nil }
}

private final class TimerDriver<C: Clock>: AnyTimerDriver where C.Duration == Duration {
  private let clock: C
  private let interval: Duration
  private var start: C.Instant?
  private var ticks = 0

  init(clock: C, interval: Duration) {
    self.clock = clock
    self.interval = interval
  }

  override func next() async -> Duration? {
    guard !Task.isCancelled else { return nil }
    let start: C.Instant
    if let existing = self.start {
      start = existing
    } else {
      start = self.clock.now
      self.start = start
    }
    self.ticks += 1
    let elapsed = self.interval * self.ticks
    do {
      try await self.clock.sleep(until: start.advanced(by: elapsed), tolerance: nil)
    } catch {
      return nil
    }
    return elapsed
  }
}

/// A timer on a clock whose timers the runtime queues: it waits for each tick as one record in
/// the clock's queue (``QueuedWait``), reused from tick to tick.
final class QueuedTimerDriver: AnyTimerDriver {
  private let host: any TimerHost
  private let interval: Duration
  private var start: Duration?
  private var ticks = 0
  private var wait: QueuedWait?

  init(host: any TimerHost, interval: Duration) {
    self.host = host
    self.interval = interval
  }

  override func next() async -> Duration? {
    guard !Task.isCancelled else { return nil }
    let start: Duration
    if let existing = self.start {
      start = existing
    } else {
      start = self.host.nowOffset
      self.start = start
    }
    self.ticks += 1
    let elapsed = self.interval * self.ticks
    let deadline = start + elapsed
    // NB: a tick already due (the loop's body took longer than the interval, or the interval is
    // zero) waits in the queue too, which fires it at once: as `sleep(until:)` of a past instant,
    // it suspends, so a loop whose body never suspends still lets its thread go.
    let wait = self.wait ?? QueuedWait(host: self.host)
    self.wait = wait
    guard await wait.wait(until: deadline) else {
      self.wait = nil
      return nil
    }
    return elapsed
  }
}

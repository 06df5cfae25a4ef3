#if canImport(Glibc)
import Glibc
#if canImport(SwiftOverlayShims)
// NB: `timespec`'s fields are declared there; with member import visibility, a whole-module build
// that also sees `Duration(attoseconds:)` asks for this import explicitly.
import SwiftOverlayShims
#endif
#elseif canImport(Musl)
import Musl
#endif

/// The timers of every store on one clock: a queue of records serviced by one driving task.
///
/// Arming a timer inserts a record (its ``TimerEntry``) into a heap; cancelling removes it. One
/// task sleeps until the earliest deadline (a second at most), rounded up to the next millisecond
/// so that one wake-up serves every timer due within it (``wakeTime(for:)``), fires what is due (a
/// hop to each timer's store) and sleeps again; it ends when the queue is empty, and the next
/// arming starts another. A timer armed *earlier* than the driver's current wake starts a new
/// driver for that deadline and cancels the old one, which wakes at once, sees it is no longer the
/// current one and ends without firing. (Its cancelled `Task.sleep` stays registered with the
/// executor until its deadline, ~750 B; hence the one-second cap on a sleep, which bounds those to
/// the last second's replacements.) Re-arming a later deadline (an idle timer restarted by every
/// request) touches only the entry: the heap catches up when the entry's old place reaches its top
/// (``TimerQueue``), and a driver sleeping until that old deadline wakes, fires nothing and sleeps
/// again.
///
/// There is one service per clock type the runtime knows (``timerHost(for:)``):
/// `ContinuousClock` and `SuspendingClock`, whose instances all tell the same time. A
/// ``TestClock`` is its own host (its timers wake in order with its sleepers); any other clock
/// runs a timer as a sleeping task (``Effect/send(_:after:clock:)``).
final class TimerService<C: Clock<Duration>>: TimerHost {
  private struct State: Sendable {
    var queue = TimerQueue()
    var driver = Driver.none
    var generation: UInt64 = 0
    /// The current driver's task, cancelled when a newer driver replaces it.
    var task: Task<Void, Never>?
  }

  /// What the current driving task is doing.
  private enum Driver: Sendable {
    /// No task: the queue is empty.
    case none
    /// Firing what is due; it looks at the queue again before it sleeps.
    case firing
    /// Sleeping until this deadline.
    case sleeping(until: Duration)
  }

  private let clock: C
  private let origin: C.Instant
  /// The system clock `C` reads, read directly; `nil` where the service reads `clock`.
  private let system: SystemClock?
  private let state = LockedBox(State())

  init(clock: C) {
    self.clock = clock
    self.origin = clock.now
    self.system = SystemClock(reading: C.self)
  }

  @usableFromInline var hostClock: any Clock<Duration> { self.clock }

  @usableFromInline var queuesTimers: Bool { true }

  @usableFromInline var nowOffset: Duration {
    guard let system = self.system else { return self.origin.duration(to: self.clock.now) }
    return Duration(attoseconds: Int128(system.nanosecondsSinceOrigin()) &* 1_000_000_000)
  }

  @usableFromInline var nowNanoseconds: Int64 {
    guard let system = self.system else { return self.nowOffset.nanoseconds }
    return system.nanosecondsSinceOrigin()
  }

  @usableFromInline func arm(_ entry: TimerEntry) {
    let generation = self.state.withLock { state -> UInt64? in
      // NB: a cancellation sets the flag before it disarms; checked under the lock, so either
      // this sees it or the disarm comes after the insert and removes it.
      guard !entry.isCancelled else { return nil }
      state.queue.insert(entry)
      return Self.wake(&state, for: entry.deadline)
    }
    if let generation { self.startDriver(generation) }
  }

  @usableFromInline func disarm(_ entry: TimerEntry) {
    self.state.withLock { _ = $0.queue.remove(entry) }
  }

  @usableFromInline func rearm(
    _ entry: TimerEntry,
    deadline: Duration,
    update: (TimerEntry) -> Bool
  ) -> Bool {
    let (rearmed, generation) = self.state.withLock { state -> (Bool, UInt64?) in
      guard !entry.isCancelled, state.queue.contains(entry), update(entry) else {
        return (false, nil)
      }
      state.queue.reschedule(entry, to: deadline)
      return (true, Self.wake(&state, for: deadline))
    }
    if let generation { self.startDriver(generation) }
    return rearmed
  }

  /// A new driver's generation when an entry now due at `deadline` must wake one: none drives the
  /// queue, or the one there sleeps past the wake boundary of `deadline` (``wakeTime(for:)``).
  private static func wake(_ state: inout State, for deadline: Duration) -> UInt64? {
    switch state.driver {
    case .firing:
      return nil
    case .sleeping(let until) where until.attoseconds <= deadline.attoseconds:
      // NB: checked first: an idle timer re-armed on every request lands here, with no rounding.
      return nil
    case .sleeping(let until) where until.attoseconds <= Self.wakeTime(for: deadline).attoseconds:
      return nil
    case .none, .sleeping:
      state.generation &+= 1
      state.driver = .sleeping(until: Self.wakeTime(for: deadline))
      return state.generation
    }
  }

  private func startDriver(_ generation: UInt64) {
    // NB: detached: the driver serves every store on the clock and must not inherit the
    // task-locals (dependencies, a test executor) of whichever store armed the timer that
    // started it. It owns nothing: it ends when the queue is empty or a newer driver replaced it.
    let task = Task.detached { await self.drive(generation) }
    let replaced = self.state.withLock { state -> Task<Void, Never>? in
      // NB: a driver already replaced ends at its first look at the queue, before any sleep.
      guard state.generation == generation else { return nil }
      defer { state.task = task }
      return state.task
    }
    // NB: a replaced driver sleeps until its own deadline (an idle timer's, minutes away) before
    // it sees it was replaced: ~2.2 KB held that long for every timer armed earlier than the
    // driver's wake. Cancelled, its sleep returns at once and it ends.
    replaced?.cancel()
  }

  private enum Step {
    case fire
    case sleep(until: Duration)
    case end
  }

  private func drive(_ generation: UInt64) async {
    var due: [TimerEntry] = []
    while true {
      let now = self.nowOffset
      let step = self.state.withLock { state -> Step in
        guard state.generation == generation else { return .end }
        state.queue.popDue(by: now, into: &due)
        if !due.isEmpty {
          state.driver = .firing
          return .fire
        }
        guard let next = state.queue.nextDeadline else {
          state.driver = .none
          return .end
        }
        // NB: never longer than a second: a replaced driver's sleep (cancelled, its task ended)
        // stays registered with the executor until its deadline, ~750 B each, for every timer
        // armed earlier than the driver's wake; a driver with only an idle timer's deadline ahead
        // wakes once a second instead.
        let until = min(next.attoseconds, now.attoseconds &+ Self.longestSleep)
        let wake = Self.wakeTime(for: Duration(attoseconds: until))
        state.driver = .sleeping(until: wake)
        return .sleep(until: wake)
      }
      switch step {
      case .end:
        return
      case .fire:
        for entry in due { await entry.fire(on: self) }
        due.removeAll(keepingCapacity: true)
      case .sleep(let deadline):
        try? await self.clock.sleep(until: self.instant(at: deadline), tolerance: nil)
      }
    }
  }
}

extension TimerService {
  /// The wake quantum, 1 ms in attoseconds: a driver sleeps until a multiple of it.
  static var wakeQuantum: Int128 { 1_000_000_000_000_000 }

  /// The longest a driver sleeps before it looks at the queue again, 1 s in attoseconds.
  static var longestSleep: Int128 { 1_000_000_000_000_000_000 }

  /// The first wake boundary at or after `deadline`.
  ///
  /// The driver sleeps until its next deadline rounded up to a millisecond of the service's
  /// timeline, so one wake-up fires every timer due within that millisecond. A timer fires at most
  /// 1 ms after its deadline, never before it.
  ///
  /// NB: with 100,000 stores ticking once a second at spread phases, a driver that slept until
  /// each next deadline woke tens of thousands of times a second; this quantum about halves the
  /// ticking's CPU, and a longer one saved no more (`Benchmarks/HISTORY.md`).
  static func wakeTime(for deadline: Duration) -> Duration {
    let attoseconds = deadline.attoseconds
    let remainder = attoseconds % Self.wakeQuantum
    guard remainder != 0 else { return deadline }
    // NB: `%` keeps the dividend's sign: subtracting the remainder rounds toward zero, which is up
    // for a negative deadline (one before the service's first reading) and down otherwise.
    let towardZero = attoseconds - remainder
    return Duration(attoseconds: attoseconds > 0 ? towardZero + Self.wakeQuantum : towardZero)
  }

  /// The instant of `clock` at `deadline` on the service's timeline.
  ///
  /// With the system clock read directly, its timeline starts at a reading of its own, not at
  /// `origin`: the instant is then `deadline`'s distance from now, from `clock`'s now. The offset
  /// is read first, so the instant is at most the time between the two readings late, never early.
  private func instant(at deadline: Duration) -> C.Instant {
    guard self.system != nil else { return self.origin.advanced(by: deadline) }
    let remaining = deadline - self.nowOffset
    return self.clock.now.advanced(by: remaining)
  }
}

/// A system clock read with `clock_gettime`: nanoseconds since a first reading.
///
/// NB: on Linux the Swift runtime reads `ContinuousClock` as `CLOCK_BOOTTIME` and `SuspendingClock`
/// as `CLOCK_MONOTONIC`. Reading them directly skips `now`'s own overhead and `Duration`'s
/// 128-bit arithmetic to subtract the origin and make nanoseconds; every session's action reads
/// the time, and every armed timer.
struct SystemClock: Sendable {
  #if os(Linux)
  private let id: clockid_t
  #endif
  private let origin: Int64

  /// The system clock of `clock`'s type, if it is one the runtime's documented behaviour names.
  init?<C: Clock>(reading clock: C.Type) {
    #if os(Linux)
    if clock == ContinuousClock.self {
      self.id = CLOCK_BOOTTIME
    } else if clock == SuspendingClock.self {
      self.id = CLOCK_MONOTONIC
    } else {
      return nil
    }
    self.origin = Self.read(self.id)
    #else
    return nil
    #endif
  }

  /// Nanoseconds since the first reading.
  @inline(__always)
  func nanosecondsSinceOrigin() -> Int64 {
    #if os(Linux)
    Self.read(self.id) &- self.origin
    #else
    0
    #endif
  }

  #if os(Linux)
  @inline(__always)
  private static func read(_ id: clockid_t) -> Int64 {
    var time = timespec()
    clock_gettime(id, &time)
    return Int64(time.tv_sec) &* 1_000_000_000 &+ Int64(time.tv_nsec)
  }
  #endif
}

/// The service of every `ContinuousClock` timer in the process.
let continuousTimers = TimerService(clock: ContinuousClock())

/// The service of every `SuspendingClock` timer in the process.
let suspendingTimers = TimerService(clock: SuspendingClock())

/// The host that queues timers of `clock`, if the runtime knows the clock; otherwise a timer on it
/// runs as a sleeping task.
///
/// NB: compares metadata before casting: a dynamic cast per armed timer is costly.
@usableFromInline func timerHost(for clock: any Clock<Duration>) -> (any TimerHost)? {
  let type = ObjectIdentifier(Swift.type(of: clock))
  if type == ObjectIdentifier(ContinuousClock.self) { return continuousTimers }
  if type == ObjectIdentifier(TestClock.self) { return clock as? TestClock }
  if type == ObjectIdentifier(SuspendingClock.self) { return suspendingTimers }
  return nil
}

/// The host that queues timers of `clock`, or a ``ClockHost`` for a clock the runtime does not
/// know.
@usableFromInline func timerHostOrClock(for clock: any Clock<Duration>) -> any TimerHost {
  timerHost(for: clock) ?? ClockHost(clock: clock)
}

/// The stand-in host of a clock the runtime has no timer queue for: it queues nothing
/// (``queuesTimers`` is `false`); the planner runs such a timer as a task that sleeps on
/// ``hostClock``.
///
/// Only its clock is used: the planner never reads the time of, arms, re-arms or disarms a timer
/// whose host does not queue timers (its time reads zero).
@usableFromInline final class ClockHost: TimerHost {
  @usableFromInline let hostClock: any Clock<Duration>

  @usableFromInline init(clock: any Clock<Duration>) {
    self.hostClock = clock
  }

  @usableFromInline var queuesTimers: Bool { false }

  @usableFromInline var nowOffset: Duration { .zero }

  @usableFromInline var nowNanoseconds: Int64 { 0 }

  @usableFromInline func arm(_ entry: TimerEntry) {
    preconditionFailure("A timer was queued on a clock with no timer queue.")
  }

  @usableFromInline func disarm(_ entry: TimerEntry) {}

  @usableFromInline func rearm(
    _ entry: TimerEntry,
    deadline: Duration,
    update: (TimerEntry) -> Bool
  ) -> Bool {
    false
  }
}

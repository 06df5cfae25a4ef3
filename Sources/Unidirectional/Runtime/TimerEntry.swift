import Synchronization

/// Where armed timers wait for their deadline: a clock's timer service (``TimerService``), or a
/// ``TestClock`` itself.
///
/// A host keeps entries ordered by deadline, ties in the order they were armed, and fires each
/// one when its clock reaches its deadline (``TimerEntry/fire(on:)``). Arming, re-arming and
/// disarming never start a task.
@usableFromInline protocol TimerHost: AnyObject, Sendable {
  /// The clock whose time the host keeps.
  var hostClock: any Clock<Duration> { get }

  /// Whether the host queues timers; `false` for a clock the runtime has no timer queue for
  /// (``ClockHost``), whose timers run as tasks that sleep on it.
  var queuesTimers: Bool { get }

  /// The host clock's current time, as an offset on the host's own timeline.
  var nowOffset: Duration { get }

  /// ``nowOffset`` in whole nanoseconds: what a session records on every action, without
  /// `Duration`'s 128-bit arithmetic.
  var nowNanoseconds: Int64 { get }

  /// Queues `entry` for its ``TimerEntry/deadline``; does nothing if it has been cancelled.
  func arm(_ entry: TimerEntry)

  /// Removes `entry` if it is queued (its unit was cancelled).
  func disarm(_ entry: TimerEntry)

  /// Moves a queued `entry` to `deadline`, behind every entry armed before, as if it were armed
  /// anew, after `update` has changed what it sends; `false`, with nothing changed, when it is not
  /// queued (it fired, or is firing, or was never armed), was cancelled, or `update` refuses it.
  ///
  /// `update` runs under the host's lock, while the entry is queued: no firing reads it then.
  func rearm(_ entry: TimerEntry, deadline: Duration, update: (TimerEntry) -> Bool) -> Bool
}

extension TimerHost {
  /// The deadline of a timer armed now to wait `delay` (a negative delay waits for nothing).
  @inlinable func deadline(after delay: Duration) -> Duration {
    Duration(attoseconds: self.nowOffset.attoseconds &+ max(delay.attoseconds, 0))
  }
}

/// `Duration` arithmetic on the paths that arm a timer, as attoseconds.
///
/// NB: `Duration`'s own operators (and `.zero`) are calls into the standard library, not inlined,
/// and the optimizer retains what it holds across each call; re-arming a timer made five of them.
extension Duration {
  /// Whether the duration is zero.
  @inlinable var isZeroLength: Bool { self.attoseconds == 0 }

  /// Whether the duration is longer than zero.
  @inlinable var isPositiveLength: Bool { self.attoseconds > 0 }
}

/// One armed timer of ``Effect/send(_:after:clock:)`` or ``Effect/send(_:every:clock:)``: a unit of
/// effect work that is a small record in its clock's timer queue, not a task.
///
/// The store registers it like any unit (under its cancellation identifiers, in its lifetime), so
/// `.cancel(id:)`, ``StoreTask/cancel()`` and shutdown reach it; cancelling it removes it from its
/// host's queue at once (``EffectStateMachine`` hands it back for that). A one-shot timer finishes
/// once its action has been reduced; a repeating one is queued again for its next deadline.
///
/// Its base class holds what the hosts need, without the store's `Action` type.
// Each mutable field has one writer at a time, ordered by a lock. (Before a store takes an
// effect's payload as its record, ``TimerOperation`` says who touches it.) `deadline`, `sequence`
// and `heapIndex` are read and written only by the entry's host, under the host's lock, or by the one
// task that popped the entry from the queue (while it is not queued, nothing else touches them).
// `owner` changes only when the entry is re-armed in place (`EffectStateMachine.moveRearmed`):
// on the store's executor, under the supervisor's lock; it is read only there (the planner, on
// the store's executor) or under that lock (the state machine).
// Safety: as just said; everything else is immutable or atomic.
@usableFromInline class TimerEntry: EffectUnit, @unchecked Sendable {
  /// The lifetime the entry belongs to; `nil` when it stands for its own.
  ///
  /// NB: the mutable fields skip the run-time exclusivity checks (`@exclusivity(unchecked)`):
  /// their accesses are ordered by locks as the Safety note says, and the checks are a visible
  /// share of a re-arm (`Benchmarks/HISTORY.md`).
  @usableFromInline @exclusivity(unchecked) final var owner: (any EffectUnit)?
  /// The host that queues the entry.
  @usableFromInline let host: any TimerHost
  /// When the entry fires next, on the host's timeline (an effect's payload: its delay).
  @usableFromInline @exclusivity(unchecked) final var deadline: Duration
  /// The order in which entries were armed (ties between equal deadlines), set by the host.
  @exclusivity(unchecked) final var sequence: UInt64 = 0
  // NB: the heap position as 32 bits and the flags last, together, then the subclass's flags:
  // with its binding and action after them, a one-shot timer is a 128 B allocation, not 160
  // (every armed idle timer pays it).
  @exclusivity(unchecked) private final var heapSlot: Int32 = -1
  private let flags = Atomic<UInt8>(UnitFlags.timer)

  @usableFromInline
  init(lifetime: (any EffectUnit)?, host: any TimerHost, deadline: Duration) {
    self.owner = lifetime
    self.host = host
    self.deadline = deadline
  }

  /// The entry's position in its host's heap; `-1` when it is not queued.
  ///
  /// NB: stored in 32 bits: a heap of more than two billion timers would need hundreds of
  /// gigabytes first.
  final var heapIndex: Int {
    get { Int(self.heapSlot) }
    set { self.heapSlot = Int32(truncatingIfNeeded: newValue) }
  }

  /// The interval between firings of a repeating timer; zero for a one-shot timer (a repeating
  /// one's is positive: ``Effect/send(_:every:clock:fileID:filePath:line:column:)`` refuses
  /// others).
  ///
  /// NB: stored only by repeating timers (``RepeatingTimerOperation``): 16 B of every one-shot timer.
  @usableFromInline var interval: Duration { .zero }

  @usableFromInline var lifetime: any EffectUnit {
    self.owner ?? self
  }

  @usableFromInline final func loadFlags() -> UInt8 {
    self.flags.load(ordering: .acquiring)
  }

  @usableFromInline final func insertFlags(_ flags: UInt8) {
    self.flags.bitwiseOr(flags, ordering: .acquiringAndReleasing)
  }

  /// Sends the timer's action to its store (the host popped the entry, its deadline has come),
  /// then finishes a one-shot timer or re-arms a repeating one.
  func fire(on host: any TimerHost) async {}

  /// The test executor the timer's store runs its effects on, settled after each firing on a
  /// ``TestClock``.
  var drainer: (any ManualDrainer)? { nil }

  /// Makes an effect's payload a timer of `lifetime` due at `deadline`: nothing else holds it, so
  /// nothing reads it meanwhile. (Its flags are still the ones it was made with: a payload is taken
  /// once, and nothing marks it before.)
  @usableFromInline final func bind(lifetime: (any EffectUnit)?, deadline: Duration) {
    precondition(self.heapSlot < 0, "A queued timer was taken as a payload.")
    self.owner = lifetime
    self.deadline = deadline
  }
}

/// A timer of one store's effects, and before that the payload of the effect that asks for it
/// (``Effect/send(_:after:clock:)``, ``Effect/send(_:every:clock:)``, a debounced or throttled
/// `.run`): the action or effect, the delay, the clock's host, and the identifier the timer was
/// made cancellable with (``fold(_:cancelInFlight:)``).
///
/// The store that arms the effect's timer takes this payload as its record when nothing else
/// holds the effect (``record(of:lifetime:host:delivery:supervisor:)``): arming allocates nothing
/// beyond the effect the reducer built. A payload something else still holds (a `static let`
/// effect, one effect returned twice in a merge) is copied into a record of the store's.
///
/// Until a store takes it, ``binding`` holds the folded identifier and ``TimerEntry/deadline``
/// holds the delay; once taken, the binding is the way to the store and the deadline is the
/// record's. A payload is never read as a record, nor a record as a payload: a store takes only
/// a payload nothing else holds, and nothing reads it as a payload again.
// An effect's payload can be shared by effect values on several threads: while it is one, only
// `fold` writes it (once, by the caller that wins `claimed`, before the keyed effect that reads the
// identifier exists); everything else is read-only. A store writes it when it takes it, holding
// the only reference. As a record, its fields follow `TimerEntry`'s rules; `binding` is written
// only when it is taken, the subclasses' `payload` only as they say.
// Safety: as just said.
@usableFromInline class TimerOperation<Action: Sendable>: TimerEntry, @unchecked Sendable {
  /// What the timer belongs to.
  ///
  /// NB: three cases, not an optional identifier in one: that enum took 25 B, this one 24, and
  /// the byte past the record's 128 put a one-shot timer whose action is over 8 B in malloc's
  /// 144 B class.
  @usableFromInline enum Binding: Sendable {
    /// An effect's payload with no identifier folded in.
    case payload
    /// An effect's payload, with the identifier of the innermost `.cancellable(id:)` folded in;
    /// it applies only to an effect made with `keyed: true`.
    case keyedPayload(CancelKey)
    /// A store's armed timer: the way to the store.
    case store(EffectDelivery<Action>, EffectSupervisor)
  }

  // NB: the three flags first, in the padding after the entry's own fields; the binding shares its
  // 24 B between the payload's identifier and the store's delivery and supervisor (never both):
  // a one-shot timer sending an action of up to 16 B is a 128 B allocation.
  /// Whether an identifier was folded in (``fold(_:cancelInFlight:)``).
  private let claimed = Atomic(false)
  /// Whether the folded `.cancellable` cancels in-flight effects first.
  ///
  /// NB: `@exclusivity(unchecked)`, like the entry's fields: the run-time access checks on the
  /// payload's fields are on every re-arm; the Safety note above says who writes them when.
  @usableFromInline @exclusivity(unchecked) final private(set) var cancelInFlight = false
  /// Whether the timer starts an effect (a ``RunTimerOperation``) rather than sending an action
  /// (a ``SendTimerOperation``).
  @usableFromInline final let startsEffect: Bool
  @usableFromInline @exclusivity(unchecked) final var binding: Binding

  /// An effect's payload due `delay` after it is armed.
  @usableFromInline
  init(
    delay: Duration,
    host: any TimerHost,
    startsEffect: Bool,
    cancelKey: CancelKey?,
    cancelInFlight: Bool
  ) {
    self.startsEffect = startsEffect
    self.cancelInFlight = cancelInFlight
    // NB: no `Optional.map`: unspecialized here, it looked up generic metadata per timer.
    if let cancelKey {
      self.binding = .keyedPayload(cancelKey)
    } else {
      self.binding = .payload
    }
    super.init(lifetime: nil, host: host, deadline: delay)
    if cancelKey != nil { self.claimed.store(true, ordering: .relaxed) }
  }

  /// A store's record, due at `deadline`.
  @usableFromInline
  init(
    lifetime: (any EffectUnit)?,
    host: any TimerHost,
    deadline: Duration,
    startsEffect: Bool,
    delivery: EffectDelivery<Action>,
    supervisor: EffectSupervisor
  ) {
    self.startsEffect = startsEffect
    self.binding = .store(delivery, supervisor)
    super.init(lifetime: lifetime, host: host, deadline: deadline)
  }

  /// The time from arming to the first firing (a payload's).
  @inlinable final var delay: Duration { self.deadline }

  /// The clock the timer waits on.
  final var clock: any Clock<Duration> { self.host.hostClock }

  /// The identifier folded into a payload, if any; an unkeyed effect must not read it (another
  /// thread may be folding one in).
  @inlinable final var cancelKey: CancelKey? {
    guard case .keyedPayload(let key) = self.binding else { return nil }
    return key
  }

  /// The way to the record's store.
  @inlinable final var delivery: EffectDelivery<Action> {
    guard case .store(let delivery, _) = self.binding else {
      preconditionFailure("A timer's payload was used as a record.")
    }
    return delivery
  }

  /// The record's store's supervisor.
  @inlinable final var supervisor: EffectSupervisor {
    guard case .store(_, let supervisor) = self.binding else {
      preconditionFailure("A timer's payload was used as a record.")
    }
    return supervisor
  }

  /// The action the timer sends; `nil` when it starts ``run`` instead.
  ///
  /// NB: the payload is a subclass's, not an `Action?` here: the optional's metadata was looked up
  /// at run time in every deinit, and an enum of both payloads was copied through runtime
  /// witnesses, on every re-arm.
  @inlinable final var action: Action? {
    self.startsEffect ? nil : unsafeDowncast(self, to: SendTimerOperation<Action>.self).payload
  }

  /// The effect the timer starts at its deadline (a debounced `.run`); `nil` when it sends.
  @inlinable final var run: RunOperation<Action>? {
    self.startsEffect ? unsafeDowncast(self, to: RunTimerOperation<Action>.self).payload : nil
  }

  override var drainer: (any ManualDrainer)? {
    self.supervisor.drainer
  }

  /// Records `key` as the payload's innermost identifier, if no identifier was folded in yet;
  /// `false` otherwise (then the caller wraps the timer).
  @usableFromInline final func fold(_ key: CancelKey, cancelInFlight: Bool) -> Bool {
    guard
      self.claimed.compareExchange(expected: false, desired: true, ordering: .relaxed).exchanged
    else { return false }
    self.binding = .keyedPayload(key)
    self.cancelInFlight = cancelInFlight
    return true
  }

  /// The record of the store `supervisor` for the timer of `timer`, a payload, due its delay from
  /// now: the payload itself when nothing else holds it, else a copy.
  ///
  /// NB: inlinable, so it is specialized with the planner for the store's action: the generic
  /// version looked up the record's type metadata at run time for every armed timer.
  @inlinable static func record(
    of timer: consuming TimerOperation<Action>,
    lifetime: (any EffectUnit)?,
    host: any TimerHost,
    delivery: EffectDelivery<Action>,
    supervisor: EffectSupervisor
  ) -> TimerEntry {
    var timer = timer
    let deadline = host.deadline(after: timer.delay)
    if isKnownUniquelyReferenced(&timer) {
      // Nothing else holds the effect: its payload becomes the record.
      timer.bind(lifetime: lifetime, deadline: deadline)
      timer.binding = .store(delivery, supervisor)
      return timer
    }
    if let run = timer.run {
      return RunTimerOperation(
        lifetime: lifetime,
        run: run,
        host: host,
        deadline: deadline,
        delivery: delivery,
        supervisor: supervisor
      )
    }
    let action = timer.action.unsafelyUnwrapped
    let interval = timer.interval
    if interval.isPositiveLength {
      return RepeatingTimerOperation(
        lifetime: lifetime,
        action: action,
        interval: interval,
        host: host,
        deadline: deadline,
        delivery: delivery,
        supervisor: supervisor
      )
    }
    return SendTimerOperation(
      lifetime: lifetime,
      action: action,
      host: host,
      deadline: deadline,
      delivery: delivery,
      supervisor: supervisor
    )
  }
}

/// A timer that sends an action: an effect's payload, then a store's record.
// `payload` changes only when the record is reused or re-armed in place, under its host's lock
// while it is queued (or while nothing else holds it); the firing task reads it after popping the
// record under that lock.
// Safety: as just said, and as for `TimerOperation`.
@usableFromInline
class SendTimerOperation<Action: Sendable>: TimerOperation<Action>, @unchecked Sendable {
  @usableFromInline @exclusivity(unchecked) final var payload: Action

  /// An effect's payload.
  @usableFromInline
  init(
    action: Action,
    delay: Duration,
    host: any TimerHost,
    cancelKey: CancelKey? = nil,
    cancelInFlight: Bool = false
  ) {
    self.payload = action
    super.init(
      delay: delay,
      host: host,
      startsEffect: false,
      cancelKey: cancelKey,
      cancelInFlight: cancelInFlight
    )
  }

  /// A store's record.
  @inlinable init(
    lifetime: (any EffectUnit)?,
    action: Action,
    host: any TimerHost,
    deadline: Duration,
    delivery: EffectDelivery<Action>,
    supervisor: EffectSupervisor
  ) {
    self.payload = action
    super.init(
      lifetime: lifetime,
      host: host,
      deadline: deadline,
      startsEffect: false,
      delivery: delivery,
      supervisor: supervisor
    )
  }

  override func fire(on host: any TimerHost) async {
    if self.isCancelled { return }
    // NB: the store drops the action if the timer was cancelled meanwhile (the delivery rule,
    // checked on the store's executor), so a cancellation that raced this firing wins.
    await self.delivery.deliver(self.payload, self)
    if self.interval.isPositiveLength {
      self.deadline = Duration(attoseconds: self.deadline.attoseconds &+ self.interval.attoseconds)
      host.arm(self)
    } else {
      self.supervisor.complete(self)
    }
  }
}

/// A ``SendTimerOperation`` of ``Effect/send(_:every:clock:fileID:filePath:line:column:)``: queued
/// again for its next deadline each time it fires.
// Safety: as for `SendTimerOperation`; the field added here is immutable.
@usableFromInline
final class RepeatingTimerOperation<Action: Sendable>: SendTimerOperation<Action>,
  @unchecked Sendable
{
  @usableFromInline let period: Duration

  /// An effect's payload: the first firing is one interval after arming.
  @usableFromInline
  init(
    action: Action,
    interval: Duration,
    host: any TimerHost,
    cancelKey: CancelKey? = nil,
    cancelInFlight: Bool = false
  ) {
    self.period = interval
    super.init(
      action: action,
      delay: interval,
      host: host,
      cancelKey: cancelKey,
      cancelInFlight: cancelInFlight
    )
  }

  /// A store's record.
  @inlinable init(
    lifetime: (any EffectUnit)?,
    action: Action,
    interval: Duration,
    host: any TimerHost,
    deadline: Duration,
    delivery: EffectDelivery<Action>,
    supervisor: EffectSupervisor
  ) {
    self.period = interval
    super.init(
      lifetime: lifetime,
      action: action,
      host: host,
      deadline: deadline,
      delivery: delivery,
      supervisor: supervisor
    )
  }

  @usableFromInline override var interval: Duration {
    self.period
  }
}

/// A timer that starts an effect at its deadline (a debounced `.run`): a record in its clock's
/// queue while it waits, a task only once it fires.
///
/// Firing hands the record's place to a ``RunJob`` for the effect, in the same lifetime and under
/// the same identifiers (``EffectSupervisor/startFired(_:makeJob:)``), so the effect stays
/// cancellable as one; a newer debounced effect re-arms a waiting one in place, with its own
/// effect.
// `payload` changes only when the record is re-armed in place, under its host's lock while it is
// queued, and is read by the firing task after it popped the record.
// Safety: as just said, and as for `TimerOperation`.
@usableFromInline
final class RunTimerOperation<Action: Sendable>: TimerOperation<Action>, @unchecked Sendable {
  @usableFromInline @exclusivity(unchecked) final var payload: RunOperation<Action>

  /// An effect's payload.
  @usableFromInline
  init(
    run: RunOperation<Action>,
    delay: Duration,
    host: any TimerHost,
    cancelKey: CancelKey? = nil,
    cancelInFlight: Bool = false
  ) {
    self.payload = run
    super.init(
      delay: delay,
      host: host,
      startsEffect: true,
      cancelKey: cancelKey,
      cancelInFlight: cancelInFlight
    )
  }

  /// A store's record.
  @inlinable init(
    lifetime: (any EffectUnit)?,
    run: RunOperation<Action>,
    host: any TimerHost,
    deadline: Duration,
    delivery: EffectDelivery<Action>,
    supervisor: EffectSupervisor
  ) {
    self.payload = run
    super.init(
      lifetime: lifetime,
      host: host,
      deadline: deadline,
      startsEffect: true,
      delivery: delivery,
      supervisor: supervisor
    )
  }

  override func fire(on host: any TimerHost) async {
    if self.isCancelled { return }
    let (run, delivery) = (self.payload, self.delivery)
    self.supervisor.startFired(self) { lifetime in
      RunJob(lifetime: lifetime, operation: run, delivery: delivery)
    }
  }
}

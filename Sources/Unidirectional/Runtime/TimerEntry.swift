import Synchronization

/// Where armed timers wait for their deadline: a clock's timer service (``TimerService``), or a
/// ``TestClock`` itself.
///
/// A host keeps entries ordered by deadline, ties in the order they were armed, and fires each
/// one when its clock reaches its deadline (``TimerEntry/fire(on:)``). Arming, re-arming and
/// disarming never start a task.
@usableFromInline protocol TimerHost: AnyObject, Sendable {
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

/// One armed timer of ``Effect/send(_:after:clock:)`` or ``Effect/send(_:every:clock:)``: a unit of
/// effect work that is a small record in its clock's timer queue, not a task.
///
/// The store registers it like any unit (under its cancellation identifiers, in its lifetime), so
/// `.cancel(id:)`, ``StoreTask/cancel()`` and shutdown reach it; cancelling it removes it from its
/// host's queue at once (``EffectStateMachine`` hands it back for that). A one-shot timer finishes
/// once its action has been reduced; a repeating one is queued again for its next deadline.
///
/// Its base class holds what the hosts need, without the store's `Action` type.
// Each mutable field has one writer at a time, ordered by a lock. `deadline`, `sequence` and
// `heapIndex` are read and written only by the entry's host, under the host's lock, or by the one
// task that popped the entry from the queue (while it is not queued, nothing else touches them).
// `owner` changes only when the entry is re-armed in place (`EffectStateMachine.moveRearmed`):
// on the store's executor, under the supervisor's lock; it is read only there (the planner, on
// the store's executor) or under that lock (the state machine).
// Safety: as just said; everything else is immutable or atomic.
@usableFromInline class TimerEntry: EffectUnit, @unchecked Sendable {
  /// The lifetime the entry belongs to; `nil` when it stands for its own.
  ///
  /// NB: the mutable fields skip the run-time exclusivity checks (`@exclusivity(unchecked)`):
  /// their accesses are ordered by locks as the Safety note says, and the checks cost a re-arm
  /// ~10 ns each.
  @exclusivity(unchecked) final var owner: (any EffectUnit)?
  /// The host that queues the entry.
  @usableFromInline let host: any TimerHost
  /// When the entry fires next, on the host's timeline.
  @exclusivity(unchecked) final var deadline: Duration
  /// The order in which entries were armed (ties between equal deadlines), set by the host.
  @exclusivity(unchecked) final var sequence: UInt64 = 0
  // NB: the heap position as 32 bits and the flags last, together: with the subclass's action
  // and delivery after them, a one-shot timer is a 128 B allocation, not 160 (every armed idle
  // timer pays it).
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
  /// NB: stored only by repeating timers (``RepeatingTimerUnit``): 16 B of every one-shot timer.
  var interval: Duration { .zero }

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

  /// Makes an ended record a new timer of `lifetime` due at `deadline` (the store's spare record,
  /// ``EffectSupervisor/takeSpareTimer()``: nothing else holds it, so nothing reads it meanwhile).
  @usableFromInline final func prepareForReuse(lifetime: (any EffectUnit)?, deadline: Duration) {
    precondition(self.heapSlot < 0, "A queued timer record was reused.")
    self.owner = lifetime
    self.deadline = deadline
    self.flags.store(UnitFlags.timer, ordering: .relaxed)
  }

  /// Whether `self` fires before `other`: earlier deadline, or equal deadline and armed first.
  @inline(__always)
  final func firesBefore(_ other: TimerEntry) -> Bool {
    self.deadline < other.deadline
      || (self.deadline == other.deadline && self.sequence < other.sequence)
  }
}

/// A ``TimerEntry`` of one store: the way to its store.
// Safety: as for `TimerEntry`; the fields added here are immutable.
@usableFromInline class StoreTimer<Action: Sendable>: TimerEntry, @unchecked Sendable {
  @usableFromInline let delivery: EffectDelivery<Action>
  @usableFromInline let supervisor: EffectSupervisor

  @inlinable init(
    lifetime: (any EffectUnit)?,
    host: any TimerHost,
    deadline: Duration,
    delivery: EffectDelivery<Action>,
    supervisor: EffectSupervisor
  ) {
    self.delivery = delivery
    self.supervisor = supervisor
    super.init(lifetime: lifetime, host: host, deadline: deadline)
  }

  override var drainer: (any ManualDrainer)? {
    self.supervisor.drainer
  }
}

/// A ``StoreTimer`` that sends an action.
// `action` changes only when the entry is re-armed in place, under its host's lock while it is
// queued; the firing task reads it after popping the entry under that lock.
// Safety: as just said, and as for `StoreTimer`.
@usableFromInline class TimerUnit<Action: Sendable>: StoreTimer<Action>, @unchecked Sendable {
  @usableFromInline @exclusivity(unchecked) final var action: Action

  /// The unit of `timer`: a ``RepeatingTimerUnit`` when it repeats, a ``DelayedRunUnit`` when it
  /// starts an effect.
  ///
  /// NB: inlinable, so it is specialized with the planner for the store's action: the generic
  /// version looked up the unit's type metadata at run time for every armed timer.
  @inlinable static func make(
    lifetime: (any EffectUnit)?,
    timer: TimerOperation<Action>,
    host: any TimerHost,
    delivery: EffectDelivery<Action>,
    supervisor: EffectSupervisor
  ) -> TimerEntry {
    let deadline = host.nowOffset + max(timer.delay, .zero)
    if let run = timer.run {
      return DelayedRunUnit(
        lifetime: lifetime,
        run: run,
        host: host,
        deadline: deadline,
        delivery: delivery,
        supervisor: supervisor
      )
    }
    let action = timer.action.unsafelyUnwrapped
    if timer.interval == nil, let spare = supervisor.takeSpareTimer(),
      ObjectIdentifier(type(of: spare)) == ObjectIdentifier(TimerUnit<Action>.self),
      spare.host === host
    {
      // NB: the same store (the spare is its supervisor's), so the same delivery and supervisor.
      let unit = unsafeDowncast(spare, to: TimerUnit<Action>.self)
      unit.prepareForReuse(lifetime: lifetime, deadline: deadline)
      unit.action = action
      return unit
    }
    if let interval = timer.interval {
      return RepeatingTimerUnit(
        lifetime: lifetime,
        action: action,
        interval: interval,
        host: host,
        deadline: deadline,
        delivery: delivery,
        supervisor: supervisor
      )
    }
    return TimerUnit(
      lifetime: lifetime,
      action: action,
      host: host,
      deadline: deadline,
      delivery: delivery,
      supervisor: supervisor
    )
  }

  @inlinable init(
    lifetime: (any EffectUnit)?,
    action: Action,
    host: any TimerHost,
    deadline: Duration,
    delivery: EffectDelivery<Action>,
    supervisor: EffectSupervisor
  ) {
    self.action = action
    super.init(
      lifetime: lifetime,
      host: host,
      deadline: deadline,
      delivery: delivery,
      supervisor: supervisor
    )
  }

  override func fire(on host: any TimerHost) async {
    if self.isCancelled { return }
    // NB: the store drops the action if the timer was cancelled meanwhile (the delivery rule,
    // checked on the store's executor), so a cancellation that raced this firing wins.
    await self.delivery.deliver(self.action, self)
    if self.interval > .zero {
      self.deadline += self.interval
      host.arm(self)
    } else {
      self.supervisor.complete(self)
    }
  }
}

/// A ``TimerUnit`` of ``Effect/send(_:every:clock:fileID:filePath:line:column:)``: queued again
/// for its next deadline each time it fires.
// Safety: as for `TimerUnit`; the field added here is immutable.
@usableFromInline
final class RepeatingTimerUnit<Action: Sendable>: TimerUnit<Action>, @unchecked Sendable {
  @usableFromInline let period: Duration

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

  override var interval: Duration {
    self.period
  }
}

/// A timer that starts an effect at its deadline (a debounced `.run`): a record in its clock's
/// queue while it waits, a task only once it fires.
///
/// Firing hands the unit's place to a ``RunJob`` for the effect, in the same lifetime and under
/// the same identifiers (``EffectSupervisor/startFired(_:makeJob:)``), so the effect stays
/// cancellable as one; a newer debounced effect re-arms a waiting one in place, with its own
/// effect.
// `run` changes only when the entry is re-armed in place, under its host's lock while it is
// queued, and is read by the firing task after it popped the entry.
// Safety: as just said, and as for `StoreTimer`.
@usableFromInline
final class DelayedRunUnit<Action: Sendable>: StoreTimer<Action>, @unchecked Sendable {
  @usableFromInline @exclusivity(unchecked) final var run: RunOperation<Action>

  @inlinable init(
    lifetime: (any EffectUnit)?,
    run: RunOperation<Action>,
    host: any TimerHost,
    deadline: Duration,
    delivery: EffectDelivery<Action>,
    supervisor: EffectSupervisor
  ) {
    self.run = run
    super.init(
      lifetime: lifetime,
      host: host,
      deadline: deadline,
      delivery: delivery,
      supervisor: supervisor
    )
  }

  override func fire(on host: any TimerHost) async {
    if self.isCancelled { return }
    let (run, delivery) = (self.run, self.delivery)
    self.supervisor.startFired(self) { lifetime in
      RunJob(lifetime: lifetime, operation: run, delivery: delivery)
    }
  }
}

/// A binary min-heap of timer entries by (deadline, arming order) that knows each entry's place,
/// so a cancelled timer leaves at once (O(log n)) instead of lingering until its deadline.
///
/// A plain value: the host guards it with its lock. `TimerQueueTests` drive it directly.
struct TimerQueue {
  private(set) var entries: [TimerEntry] = []
  private var nextSequence: UInt64 = 0

  var count: Int { self.entries.count }
  var isEmpty: Bool { self.entries.isEmpty }
  var first: TimerEntry? { self.entries.first }

  /// Queues `entry` behind every entry with the same deadline queued before it.
  mutating func insert(_ entry: TimerEntry) {
    precondition(entry.heapIndex < 0, "A timer was armed twice.")
    entry.sequence = self.nextSequence
    self.nextSequence &+= 1
    entry.heapIndex = self.entries.count
    self.entries.append(entry)
    self.siftUp(entry.heapIndex)
  }

  /// Moves a queued `entry` to `deadline`, behind every entry with that deadline queued before
  /// (a new arming order); `false` if it is not queued here.
  @discardableResult
  mutating func reschedule(_ entry: TimerEntry, to deadline: Duration) -> Bool {
    guard self.contains(entry) else { return false }
    entry.deadline = deadline
    entry.sequence = self.nextSequence
    self.nextSequence &+= 1
    self.siftDown(entry.heapIndex)
    self.siftUp(entry.heapIndex)
    return true
  }

  /// Whether `entry` is queued here.
  func contains(_ entry: TimerEntry) -> Bool {
    let index = entry.heapIndex
    return index >= 0 && index < self.entries.count && self.entries[index] === entry
  }

  /// Removes `entry`; `false` if it was not queued here.
  @discardableResult
  mutating func remove(_ entry: TimerEntry) -> Bool {
    guard self.contains(entry) else { return false }
    self.removeEntry(at: entry.heapIndex)
    return true
  }

  /// Removes every entry due by `now` into `due`, earliest first.
  mutating func popDue(by now: Duration, into due: inout [TimerEntry]) {
    while let first = self.entries.first, first.deadline <= now {
      self.removeEntry(at: 0)
      due.append(first)
    }
  }

  /// Removes and returns the earliest entry.
  mutating func popFirst() -> TimerEntry? {
    guard let first = self.entries.first else { return nil }
    self.removeEntry(at: 0)
    return first
  }

  private mutating func removeEntry(at index: Int) {
    let last = self.entries.count - 1
    let removed = self.entries[index]
    if index != last {
      self.entries.swapAt(index, last)
      self.entries[index].heapIndex = index
    }
    self.entries.removeLast()
    removed.heapIndex = -1
    if index < self.entries.count {
      self.siftDown(index)
      self.siftUp(index)
    }
  }

  private mutating func siftUp(_ start: Int) {
    var child = start
    while child > 0 {
      let parent = (child - 1) / 2
      guard self.entries[child].firesBefore(self.entries[parent]) else { break }
      self.swap(child, parent)
      child = parent
    }
  }

  private mutating func siftDown(_ start: Int) {
    var parent = start
    let count = self.entries.count
    while true {
      let left = 2 * parent + 1
      let right = left + 1
      var smallest = parent
      if left < count, self.entries[left].firesBefore(self.entries[smallest]) { smallest = left }
      if right < count, self.entries[right].firesBefore(self.entries[smallest]) {
        smallest = right
      }
      guard smallest != parent else { return }
      self.swap(parent, smallest)
      parent = smallest
    }
  }

  private mutating func swap(_ i: Int, _ j: Int) {
    self.entries.swapAt(i, j)
    self.entries[i].heapIndex = i
    self.entries[j].heapIndex = j
  }
}

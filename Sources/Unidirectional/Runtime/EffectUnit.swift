import Synchronization

/// One unit of effect work (a `.run` body, or a `.send` that runs after asynchronous work) as
/// the runtime and the store see it: its identity, its lifetime, and its delivery state.
///
/// The store checks the delivery state, on its own executor, when an action arrives: it drops
/// an action whose unit is cancelled (the delivery rule: once a cancellation is processed,
/// nothing from the effect reaches a reducer) and reports one whose unit has finished (a `Send`
/// used after its effect returned). Reading it takes no lock.
///
/// A lifetime (what a ``StoreTask`` refers to) is represented by its first unit: the units
/// that join it later point at that one, and its cancellation is a bit of that unit's state.
/// That saves an object per action (the allocation target for starting an effect is 6).
@usableFromInline protocol EffectUnit: AnyObject, Sendable {
  /// The first unit of this unit's lifetime (this unit itself, for the first one).
  var lifetime: any EffectUnit { get }
  /// The unit's state flags (``UnitFlags``).
  func loadFlags() -> UInt8
  /// Sets flags, atomically.
  func insertFlags(_ flags: UInt8)
}

extension EffectUnit {
  /// The unit's identity in the runtime's records.
  var id: EffectID {
    EffectID(self)
  }

  /// Whether the unit was cancelled.
  @inlinable var isCancelled: Bool {
    self.loadFlags() & UnitFlags.cancelled != 0
  }

  /// Whether the unit's work has returned (or will never run).
  @inlinable var isFinished: Bool {
    self.loadFlags() & UnitFlags.finished != 0
  }

  func markCancelled() {
    self.insertFlags(UnitFlags.cancelled)
  }

  func markFinished() {
    self.insertFlags(UnitFlags.finished)
  }

  /// Whether the lifetime this unit starts was cancelled (meaningful on a lifetime's first
  /// unit): units joining it later are born cancelled.
  var isLifetimeCancelled: Bool {
    self.loadFlags() & UnitFlags.lifetimeCancelled != 0
  }

  func markLifetimeCancelled() {
    self.insertFlags(UnitFlags.lifetimeCancelled)
  }
}

/// The flags of a unit's state, kept in an `Atomic<UInt8>` inside each unit (inline, so a unit
/// is one allocation).
@usableFromInline enum UnitFlags {
  @usableFromInline static let cancelled: UInt8 = 1
  @usableFromInline static let finished: UInt8 = 2
  static let lifetimeCancelled: UInt8 = 4
  /// The unit is a ``TimerEntry`` (set at its creation): cancelling it disarms it.
  static let timer: UInt8 = 8
  /// The unit belongs to an effect marked ``Effect/cancelledOnShutdown()``: a graceful shutdown
  /// cancels it at once.
  @usableFromInline static let cancelledOnShutdown: UInt8 = 16
  /// The unit is a listed ``RunUnit``: the state machine keeps it in its list of runs, and its
  /// task starts it without the supervisor's lock (``RunUnit/startUnlocked(in:)``).
  @usableFromInline static let startsUnlocked: UInt8 = 32
  /// A listed ``RunUnit`` whose task started it: its handle is in the unit.
  @usableFromInline static let running: UInt8 = 64
}

/// A unit's flags and lifetime, in a class that is not generic: an ``EffectToken`` is one, and a
/// `.run`'s ``RunUnit`` (and so its ``RunJob``) extends it.
///
/// NB: a generic class's conformance to ``EffectUnit`` is instantiated for its `Action`, so
/// passing a `RunJob` where a unit is expected (every start, finish and abandon) looked up the
/// job type's metadata at run time, in code that is not specialized (an effect's task body). A
/// class that is not generic conforms once, in a table the
/// compiler emits.
// Safety: `flags` is atomic and `owner` immutable (and `Sendable`); not final only for
// `RunUnit`, whose family the checker then asks to restate the conformance.
@usableFromInline class UnitBase: EffectUnit, @unchecked Sendable {
  private final let flags = Atomic<UInt8>(0)
  private final let owner: (any EffectUnit)?

  /// A unit of `lifetime`, or the first unit of a new one.
  @usableFromInline init(lifetime: (any EffectUnit)?) {
    self.owner = lifetime
  }

  @usableFromInline final var lifetime: any EffectUnit {
    self.owner ?? self
  }

  @usableFromInline final func loadFlags() -> UInt8 {
    self.flags.load(ordering: .acquiring)
  }

  @usableFromInline final func insertFlags(_ flags: UInt8) {
    self.flags.bitwiseOr(flags, ordering: .acquiringAndReleasing)
  }

  /// Sets `flags` unless one of `refused` is set, in one atomic step; whether it did.
  final func insertFlags(_ flags: UInt8, unless refused: UInt8) -> Bool {
    var current = self.flags.load(ordering: .relaxed)
    while current & refused == 0 {
      let (exchanged, original) = self.flags.compareExchange(
        expected: current,
        desired: current | flags,
        ordering: .acquiringAndReleasing
      )
      if exchanged { return true }
      current = original
    }
    return false
  }

  /// Marks the unit cancelled; returns its flags from just before.
  final func markCancelledReadingFlags() -> UInt8 {
    self.flags.bitwiseOr(UnitFlags.cancelled, ordering: .acquiringAndReleasing).oldValue
  }
}

/// The unit of a `.run` (``RunJob``, which is generic, extends it): with room for the handle of
/// the task that runs it, and for its place in the state machine's list of runs.
///
/// A `.run` the planner returned directly with no cancellation identifier (most are: a session's
/// persist, a log line) is *listed* (``UnitFlags/startsUnlocked``): the state machine keeps it in
/// an intrusive list instead of a record in its map, and its task starts it without the
/// supervisor's lock. The task records its handle here, then sets ``UnitFlags/running`` unless the
/// unit was cancelled first (``startUnlocked(in:)``). A canceller, under the lock, marks the unit
/// cancelled and reads the flags from just before in the same atomic step: either the task had
/// started (and its handle is here to cancel) or it will find the unit cancelled and not run it.
/// Before, each of these `.run`s took the lock once more to start, and was a record moved in and
/// out of the machine's map (the archived design in Benchmarks/HISTORY.md, *A lone `.run` is
/// listed, not recorded*).
// Safety: `slotBits` and the flags are atomic; `next`, `previous` and `pins` are read and written
// only by the effect state machine, whose every method runs under its supervisor's lock (or, in
// its tests, on one thread). Not final: `RunJob` extends it.
@usableFromInline class RunUnit: UnitBase, @unchecked Sendable {
  private final let slotBits = Atomic<UInt>(0)
  /// The next unit in the machine's list (which holds one retain of each unit in it).
  final var next: Unmanaged<RunUnit>?
  /// The previous unit in the machine's list; `nil` for its first.
  final var previous: Unmanaged<RunUnit>?
  /// Cancellers between reading the task's handle and calling `cancel()` on it.
  final var pins: UInt32 = 0

  /// Starts the unit in the task whose handle's bits are `bits`, unless it was cancelled or has
  /// finished; `false` then.
  final func startUnlocked(in bits: UInt) -> Bool {
    self.slotBits.store(bits, ordering: .relaxed)
    return self.insertFlags(
      UnitFlags.running,
      unless: UnitFlags.cancelled | UnitFlags.finished
    )
  }

  /// The bits of the handle of the task the unit started in (read after the flags showed
  /// ``UnitFlags/running``, which orders the store before this read).
  final var runningSlotBits: UInt {
    self.slotBits.load(ordering: .relaxed)
  }
}

/// A unit that is not a job of its own, a plain ``UnitBase``: a step of a plan, a cancellable
/// `.send`, or a `withTaskCancellation(id:)` block.
@usableFromInline typealias EffectToken = UnitBase

/// The identity of one unit of effect work: its address.
///
/// Kept as an unmanaged reference, not an `ObjectIdentifier`: the compiler knows a reference's
/// spare bits, so a set of two identities (``EffectIDs``) fits in 16 bytes with its case, where
/// two `ObjectIdentifier`s took 17 (24 with padding) in every lifetime record and identifier
/// entry.
// Safety: only `listedUnit()` loads through the reference, for callers that hold the unit alive;
// equality and hashing read its bits (`toOpaque()`), so, like an `ObjectIdentifier`, it may
// outlive its unit and be read on any thread.
struct EffectID: Hashable, @unchecked Sendable {
  private let unit: Unmanaged<AnyObject>

  init(_ unit: any EffectUnit) {
    self.unit = Unmanaged.passUnretained(unit)
  }

  /// The listed unit this is the identity of.
  ///
  /// Call only with the identity of a unit in the state machine's list of runs, under its lock:
  /// the list holds the unit, so the reference is valid (``EffectStateMachine``).
  func listedUnit() -> RunUnit {
    Unmanaged<RunUnit>.fromOpaque(self.unit.toOpaque()).takeUnretainedValue()
  }

  static func == (lhs: EffectID, rhs: EffectID) -> Bool {
    lhs.unit.toOpaque() == rhs.unit.toOpaque()
  }

  func hash(into hasher: inout Hasher) {
    hasher.combine(self.unit.toOpaque())
  }
}

// NB: described and reflected by address: the default would read the reference (and retain what
// it points to), which may be freed by then, where an `ObjectIdentifier` printed its bits.
extension EffectID: CustomStringConvertible, CustomReflectable {
  var description: String {
    "EffectID(\(self.unit.toOpaque()))"
  }

  var customMirror: Mirror {
    Mirror(self, children: ["address": self.unit.toOpaque()])
  }
}

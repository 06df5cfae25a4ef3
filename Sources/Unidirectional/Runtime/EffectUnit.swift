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
}

/// A unit's flags and lifetime, in a class that is not generic: an ``EffectToken`` is one, and a
/// `.run`'s ``RunJob`` extends it.
///
/// NB: a generic class's conformance to ``EffectUnit`` is instantiated for its `Action`, so
/// passing a `RunJob` where a unit is expected (every start, finish and abandon) looked up the
/// job type's metadata at run time, in code that is not specialized (an effect's task body): ~2%
/// of a session request's profile. A class that is not generic conforms once, in a table the
/// compiler emits.
// Safety: `flags` is atomic and `owner` immutable (and `Sendable`); not final only for its
// subclasses, which the checker then asks for.
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
}

/// A unit that is not a job of its own: a step of a plan, a cancellable `.send`, or a
/// `withTaskCancellation(id:)` block.
// Safety: no fields of its own; as for `UnitBase`.
@usableFromInline final class EffectToken: UnitBase, @unchecked Sendable {}

/// The identity of one unit of effect work: its address.
///
/// Kept as an unmanaged reference, not an `ObjectIdentifier`: the compiler knows a reference's
/// spare bits, so a set of two identities (``EffectIDs``) fits in 16 bytes with its case, where
/// two `ObjectIdentifier`s took 17 (24 with padding) in every lifetime record and identifier
/// entry.
// Safety: the reference is never used as one: no retain, no release, no load through it. Equality
// and hashing read its bits (`toOpaque()`), as `ObjectIdentifier` would; so it may outlive its
// unit, and be read on any thread, as an `ObjectIdentifier` may.
struct EffectID: Hashable, @unchecked Sendable {
  private let unit: Unmanaged<AnyObject>

  init(_ unit: any EffectUnit) {
    self.unit = Unmanaged.passUnretained(unit)
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

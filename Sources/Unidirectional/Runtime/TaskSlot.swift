/// The task running an effect, kept so another thread can cancel that one task.
///
/// Children of a task group cannot be cancelled one by one through the group, and their tasks
/// cannot be retained, so the runtime keeps the task's unowned handle while the effect runs.
///
/// Safety: the handle is only valid while the task is alive. The runtime guarantees that:
/// - a slot is stored in the effect's record by the task itself (``EffectSupervisor/start``),
///   or in its ``RunUnit`` when it starts without the lock, and removed by the same task when its
///   work returns (``EffectSupervisor/finish``);
/// - a canceller copies the slot out of the record and *pins* the record under the lock
///   (``EffectStateMachine/cancel(_:)``); a task whose record is pinned parks in `finish`
///   until every pin is released (``EffectStateMachine/unpin(_:)``), so the task cannot end
///   while anyone may still call ``cancel()`` on it.
///
/// `TaskSlotTests` stress-test this contract (cancellers racing effects that end).
///
/// NB: the handle is kept as its bits, not as an `UnsafeCurrentTask`: that type is not frozen
/// (its module is built for library evolution), so a stored one made the slot, the state
/// machine's records and the maps that hold them inline of unknown layout in this module, and
/// every copy, move and destroy of a record went through run-time value witnesses.
// The bits are those of an `UnsafeCurrentTask` (one word, checked in `init`); `cancel()` makes a
// proper copy of that value from them (a load, which retains what it must), and nothing else
// reads them but to compare.
// Safety: the handle is used only while its task is alive: pins keep it so (see above).
struct TaskSlot: @unchecked Sendable {
  /// The handle's bits, as a pointer: never null, so the state machine's `.pending` phase takes
  /// no byte beside a `.running` slot (8 B less in every record, and in every store's machine).
  private let bits: UnsafeRawPointer

  init(_ task: UnsafeCurrentTask) {
    self.bits = Self.bits(of: task)
  }

  /// The slot whose bits a ``RunUnit`` recorded when its task started it without the lock.
  init(unitSlotBits bits: UInt) {
    guard let pointer = UnsafeRawPointer(bitPattern: bits) else {
      preconditionFailure("A listed effect unit recorded no task handle.")
    }
    self.bits = pointer
  }

  /// The bits a ``RunUnit`` records (``RunUnit/startUnlocked(in:)``).
  var unitSlotBits: UInt {
    UInt(bitPattern: self.bits)
  }

  /// Whether this is the slot of `task`.
  func isRunning(_ task: UnsafeCurrentTask) -> Bool {
    self.bits == Self.bits(of: task)
  }

  /// Cancels the task.
  ///
  /// Call only while the effect's record is pinned (see above).
  func cancel() {
    withUnsafeBytes(of: self.bits) { $0.load(as: UnsafeCurrentTask.self) }.cancel()
  }

  private static func bits(of task: borrowing UnsafeCurrentTask) -> UnsafeRawPointer {
    withUnsafeBytes(of: task) { bytes in
      precondition(
        bytes.count == MemoryLayout<UInt>.size,
        "UnsafeCurrentTask is \(bytes.count) bytes on this runtime, not one word: TaskSlot needs updating"
      )
      guard let pointer = UnsafeRawPointer(bitPattern: bytes.load(as: UInt.self)) else {
        preconditionFailure("A task handle of zero bits.")
      }
      return pointer
    }
  }
}

/// A task handle the state machine can make from the bits a ``RunUnit`` recorded when its task
/// started it without the lock (its tests use strings and numbers).
protocol UnitSlot {
  init(unitSlotBits: UInt)
}

extension TaskSlot: UnitSlot {}

/// The task running an effect, kept so another thread can cancel that one task.
///
/// Children of a task group cannot be cancelled one by one through the group, and their tasks
/// cannot be retained, so the runtime keeps the task's unowned handle while the effect runs.
///
/// Safety: the handle is only valid while the task is alive. The runtime guarantees that:
/// - a slot is stored in the effect's record by the task itself (``EffectSupervisor/start``)
///   and removed by the same task when its work returns (``EffectSupervisor/finish``);
/// - a canceller copies the slot out of the record and *pins* the record under the lock
///   (``EffectStateMachine/cancel(_:)``); a task whose record is pinned parks in `finish`
///   until every pin is released (``EffectStateMachine/unpin(_:)``), so the task cannot end
///   while anyone may still call ``cancel()`` on it.
///
/// `TaskSlotTests` stress-test this contract (cancellers racing effects that end).
// Safety: the handle is used only while its task is alive: pins keep it so (see above).
struct TaskSlot: @unchecked Sendable {
  private let task: UnsafeCurrentTask

  init(_ task: UnsafeCurrentTask) {
    self.task = task
  }

  /// Whether this is the slot of `task`.
  func isRunning(_ task: UnsafeCurrentTask) -> Bool {
    self.task == task
  }

  /// Cancels the task.
  ///
  /// Call only while the effect's record is pinned (see above).
  func cancel() {
    self.task.cancel()
  }
}

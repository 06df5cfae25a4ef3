/// Not API: a hand-drained executor that a test harness runs effects on.
///
/// `TestClock.advance` settles the executor of each sleeper it wakes, so the woken work runs
/// until it suspends again before the clock moves on. The test store (and `withTestExecution`)
/// installs its executor with ``TestExecution/drainer`` for the tasks it starts; sleepers record
/// it when they sleep.
package protocol ManualDrainer: AnyObject, Sendable {
  /// Runs jobs until none is left. Does nothing when called from inside one of its own jobs.
  func drainUntilIdle()

  /// Lets every other job run until none is left: drains at once when called from outside the
  /// executor; from inside one of its jobs, suspends the caller until the executor is otherwise
  /// idle (the drain resumes it then).
  func settle() async
}

/// Not API: task-scoped coordination between the test store and the test clock.
package enum TestExecution {
  /// The executor the current task's work is drained on, if a test harness owns it.
  @TaskLocal package static var drainer: (any ManualDrainer)?
}

/// Runs `operation` against a sleep of `duration` on `clock`; `true` when `operation` finished
/// first.
///
/// The loser is cancelled.
///
/// NB: the sleep's deadline is read before either task starts: counted from when the sleeping
/// task first runs, a clock moved meanwhile (a test's, advanced right after the call) would push
/// it past the time it was for.
func firstToFinish(
  _ operation: @escaping @Sendable () async -> Void,
  orAfter duration: Duration,
  on clock: some Clock<Duration>
) async -> Bool {
  let deadline = clock.now.advanced(by: duration)
  return await withTaskGroup(of: Bool.self) { group in
    group.addTask {
      await operation()
      return !Task.isCancelled
    }
    group.addTask {
      try? await clock.sleep(until: deadline, tolerance: nil)
      return false
    }
    let first = await group.next() ?? false
    group.cancelAll()
    return first
  }
}

/// Runs `operation` against a sleep of `duration` on `clock`; `true` when `operation` finished
/// first.
///
/// The loser is cancelled.
func firstToFinish(
  _ operation: @escaping @Sendable () async -> Void,
  orAfter duration: Duration,
  on clock: any Clock<Duration>
) async -> Bool {
  await withTaskGroup(of: Bool.self) { group in
    group.addTask {
      await operation()
      return !Task.isCancelled
    }
    group.addTask {
      try? await clock.sleep(for: duration)
      return false
    }
    let first = await group.next() ?? false
    group.cancelAll()
    return first
  }
}

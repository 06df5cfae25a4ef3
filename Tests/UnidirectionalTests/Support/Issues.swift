import Unidirectional
import UnidirectionalTesting

/// Collects the issues reported inside `operation` instead of failing the test.
func collectingIssues<R>(
  _ operation: () async throws -> R
) async rethrows -> (R, [ReportedIssue]) {
  let issues = LockIsolated<[ReportedIssue]>([])
  let result = try await withIssueReporter(
    IssueReporter { issue in issues.withValue { $0.append(issue) } }
  ) {
    try await operation()
  }
  return (result, issues.value)
}

/// Ends a store that runs on a manual executor: cancels its effects and drains the executor so
/// every task finishes (a task parked on an undrained executor would never end, and leak).
func tearDown<State, Action>(_ store: Store<State, Action>, on executor: ManualExecutor) {
  store.shutDownEffects()
  executor.drainUntilIdle()
}

import Unidirectional

/// Collects the issues reported inside `operation` (including by test stores released inside
/// it) instead of failing the test.
func collectingIssues(
  _ operation: () async throws -> Void
) async rethrows -> [ReportedIssue] {
  let issues = LockIsolated<[ReportedIssue]>([])
  try await withIssueReporter(
    IssueReporter { issue in issues.withValue { $0.append(issue) } }
  ) {
    try await operation()
  }
  return issues.value
}

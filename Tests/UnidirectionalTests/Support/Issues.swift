import Unidirectional

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

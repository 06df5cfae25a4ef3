#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A problem the library noticed at run time: misuse, or something a test should fail on.
///
/// Examples: sending an action to a store that was shut down, an effect that threw an error with
/// no `catch` handler, a used ``UnimplementedClock``.
public struct ReportedIssue: Sendable, CustomStringConvertible {
  /// What happened, with the specifics and how to fix it.
  public var message: String
  /// The `#fileID` of the code the issue is attributed to.
  public var fileID: String
  /// The `#filePath` of the code the issue is attributed to.
  public var filePath: String
  /// The line of the code the issue is attributed to.
  public var line: Int
  /// The column of the code the issue is attributed to.
  public var column: Int

  /// Creates an issue attributed to a source location.
  public init(
    _ message: String,
    fileID: String = #fileID,
    filePath: String = #filePath,
    line: Int = #line,
    column: Int = #column
  ) {
    self.message = message
    self.fileID = fileID
    self.filePath = filePath
    self.line = line
    self.column = column
  }

  /// The issue on one line, prefixed with its source location, as printed to standard error.
  public var description: String {
    let firstLine = self.message.split(separator: "\n", omittingEmptySubsequences: true).first
    return "\(self.fileID):\(self.line): \(firstLine.map(String.init) ?? self.message)"
  }
}

/// Where reported issues go.
///
/// By default an issue fails the Swift Testing or XCTest test that is running (when the test
/// target links `UnidirectionalTesting`), and otherwise prints one line to standard error. Issues
/// raised inside effects reach the test as well: a store created during a Swift Testing test
/// starts its effects in the sending task's context, which carries the test. Replace
/// the destination for a scope with ``withIssueReporter(_:operation:)``; a ``Store`` keeps the
/// reporter that was in force when it was created.
///
/// ```swift
/// let issues = LockIsolated<[ReportedIssue]>([])
/// await withIssueReporter(IssueReporter { issue in issues.withValue { $0.append(issue) } }) {
///   let store = Store(initialState: Feature.State()) { Feature() }
///   await store.shutdown()
///   await store.send(.tapped)   // reported to `issues`, not to the test
/// }
/// ```
public struct IssueReporter: Sendable {
  private let report: @Sendable (ReportedIssue) -> Void
  /// Whether this is ``default`` (a store whose reporter is the default binds none in its effects).
  let isDefault: Bool

  /// Creates a reporter from a closure that receives every issue.
  public init(_ report: @escaping @Sendable (ReportedIssue) -> Void) {
    self.report = report
    self.isDefault = false
  }

  private init(isDefault: Bool, report: @escaping @Sendable (ReportedIssue) -> Void) {
    self.report = report
    self.isDefault = isDefault
  }

  /// Records the issue with this reporter.
  public func callAsFunction(_ issue: ReportedIssue) {
    self.report(issue)
  }

  /// Fails the running test when there is one, otherwise prints to standard error.
  public static let `default` = IssueReporter(
    isDefault: true,
    report: { issue in
      if TestFrameworkLink.record(issue) { return }
      IssueReporter.standardError(issue)
    }
  )

  /// Prints each issue as one line to standard error.
  public static let standardError = IssueReporter { issue in
    let line = "[Unidirectional] \(issue.description)\n"
    line.withCString { pointer in
      _ = write(STDERR_FILENO, pointer, strlen(pointer))
    }
  }

  /// The reporter in force for the current task.
  @TaskLocal public static var current: IssueReporter = .default
}

/// Runs `operation` with `reporter` receiving every issue reported inside it, including by
/// stores created inside it.
public func withIssueReporter<R>(
  _ reporter: IssueReporter,
  isolation: isolated (any Actor)? = #isolation,
  operation: () async throws -> R
) async rethrows -> R {
  try await IssueReporter.$current.withValue(reporter, operation: operation)
}

/// Runs `operation` with `reporter` receiving every issue reported inside it.
public func withIssueReporter<R>(
  _ reporter: IssueReporter,
  operation: () throws -> R
) rethrows -> R {
  try IssueReporter.$current.withValue(reporter, operation: operation)
}

/// Reports an issue to the reporter in force for the current task: a test failure while a test
/// runs, otherwise one line on standard error.
///
/// Use it in dependency doubles and for misuse your own code detects.
public func reportIssue(
  _ message: String,
  fileID: String = #fileID,
  filePath: String = #filePath,
  line: Int = #line,
  column: Int = #column
) {
  IssueReporter.current(
    ReportedIssue(message, fileID: fileID, filePath: filePath, line: line, column: column)
  )
}

// MARK: - Test framework link

/// The seam through which `UnidirectionalTesting` turns reported issues into test failures.
///
/// The core module cannot import Swift Testing or XCTest (they must not be linked into
/// production binaries), so it looks the bridge type up by its mangled name at run time. The
/// bridge exists in a process only when a test target links `UnidirectionalTesting`.
package protocol TestFrameworkBridge {
  /// Records the issue in the running test; returns `false` when no test is running.
  static func record(_ issue: ReportedIssue) -> Bool
  /// Whether the current task runs a test that effects must report to from their own tasks.
  static var isTestRunning: Bool { get }
}

package enum TestFrameworkLink {
  /// The mangled name of `UnidirectionalTesting.IssueBridge` (checked by a test).
  package static let bridgeMangledName = "21UnidirectionalTesting11IssueBridgeV"

  // Safety: an immutable metatype, set once by the lazy initializer.
  private nonisolated(unsafe) static let bridge: (any TestFrameworkBridge.Type)? = {
    _typeByName(bridgeMangledName) as? any TestFrameworkBridge.Type
  }()

  static func record(_ issue: ReportedIssue) -> Bool {
    guard let bridge = self.bridge else { return false }
    return bridge.record(issue)
  }

  /// Whether a test runs on the current task; `false` in a process without the bridge.
  package static var isTestRunning: Bool {
    guard let bridge = self.bridge else { return false }
    return bridge.isTestRunning
  }
}

/// Thrown by ``unimplemented(_:fileID:filePath:line:column:)`` after it reported the call.
public struct UnimplementedError: Error, CustomStringConvertible {
  /// The name of what was called.
  public var name: String

  /// A one-line description of the call.
  public var description: String {
    "'\(self.name)' is unimplemented"
  }
}

/// Reports that an unimplemented endpoint was called, then throws ``UnimplementedError``.
///
/// The building block of `testValue`s that prove what a flow does not use:
///
/// ```swift
/// static let testValue = APIClient(fetch: { _ in try unimplemented("APIClient.fetch") })
/// ```
public func unimplemented(
  _ name: String,
  fileID: String = #fileID,
  filePath: String = #filePath,
  line: Int = #line,
  column: Int = #column
) throws -> Never {
  reportIssue(
    "Unimplemented: '\(name)' was called.",
    fileID: fileID,
    filePath: filePath,
    line: line,
    column: column
  )
  throw UnimplementedError(name: name)
}

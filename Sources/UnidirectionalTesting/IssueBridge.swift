import Testing
public import Unidirectional
import XCTest

/// Not API: turns issues the core module reports into failures of the running test.
///
/// The core module cannot link Swift Testing or XCTest; it finds this type at run time by its
/// mangled name whenever a test target links `UnidirectionalTesting`.
public struct IssueBridge: TestFrameworkBridge {
  /// Whether a Swift Testing test runs on the current task.
  ///
  /// A store created then starts its effects' tasks in the creating context, so they carry the
  /// test (and any `withKnownIssue` scope) with them. XCTest needs no such link: a failure
  /// recorded from any thread reaches the running case.
  package static var isTestRunning: Bool {
    guard Test.current != nil else { return false }
    swiftTestingRunSeen.setValue(true)
    return true
  }

  /// Whether a store was created during a Swift Testing test in this process: an issue then
  /// reported from a task that carries no test (a timer's, on a real clock) still fails the run.
  static let swiftTestingRunSeen = LockIsolated(false)

  /// Records `issue` in the running Swift Testing or XCTest test; `false` when none is running.
  package static func record(_ issue: ReportedIssue) -> Bool {
    recordTestFailure(
      issue.message,
      fileID: issue.fileID,
      filePath: issue.filePath,
      line: issue.line,
      column: issue.column
    )
  }
}

/// Records a failure in the running Swift Testing test (`Issue.record`) or XCTest test (`XCTFail`),
/// at the given location.
///
/// Returns `false` when no test is running.
@discardableResult
func recordTestFailure(
  _ message: String,
  fileID: String,
  filePath: String,
  line: Int,
  column: Int
) -> Bool {
  if Test.current != nil {
    Issue.record(
      Comment(rawValue: message),
      sourceLocation: SourceLocation(fileID: fileID, filePath: filePath, line: line, column: column)
    )
    return true
  }
  if let testCase = XCTestRunObserver.shared.currentTestCase {
    testCase.recordFailure(
      withDescription: message,
      inFile: filePath,
      atLine: line,
      expected: true
    )
    return true
  }
  if IssueBridge.swiftTestingRunSeen.value {
    // NB: no test on this task: Swift Testing posts the issue to every running configuration,
    // which fails the run though it cannot name the test; the caller prints it too, in case the
    // run has ended.
    Issue.record(
      Comment(rawValue: message),
      sourceLocation: SourceLocation(fileID: fileID, filePath: filePath, line: line, column: column)
    )
    return false
  }
  // NB: the observer may have been created during the running case (it missed its start):
  // `XCTFail` still reaches that case, at this file's location, so the real one goes in the
  // message. Outside a case it records nothing, so the caller also prints the issue.
  XCTFail("\(filePath):\(line): \(message)")
  return false
}

/// Tracks the running XCTest case: corelibs' `XCTFail` silently drops a failure recorded outside
/// one, and only a test case can record a failure at a run-time file path.
///
/// The observer registers the first time the bridge is used (a test store registers it when it is
/// created); an issue in the XCTest case during which it registered goes through `XCTFail`.
final class XCTestRunObserver: NSObject, XCTestObservation, Sendable {
  static let shared: XCTestRunObserver = {
    let observer = XCTestRunObserver()
    XCTestObservationCenter.shared.addTestObserver(observer)
    return observer
  }()

  private let current = LockIsolated<ObjectIdentifier?>(nil)
  // NB: XCTest runs test cases one at a time on Linux; the case is kept unowned-by-identity
  // and looked up through `running`, which XCTest keeps alive while the case runs.
  private let running = LockIsolated<[ObjectIdentifier: UncheckedTestCase]>([:])

  var currentTestCase: XCTestCase? {
    guard let id = self.current.value else { return nil }
    return self.running.value[id]?.testCase
  }

  func testCaseWillStart(_ testCase: XCTestCase) {
    let id = ObjectIdentifier(testCase)
    self.running.withValue { $0[id] = UncheckedTestCase(testCase: testCase) }
    self.current.setValue(id)
  }

  func testCaseDidFinish(_ testCase: XCTestCase) {
    let id = ObjectIdentifier(testCase)
    self.running.withValue { _ = $0.removeValue(forKey: id) }
    self.current.withValue { if $0 == id { $0 = nil } }
  }
}

/// An `XCTestCase` reference held while the case runs.
///
/// Safety: only used to call `recordFailure`, which XCTest allows from any thread while the case
/// runs; the reference is dropped when the case finishes.
struct UncheckedTestCase: @unchecked Sendable {
  let testCase: XCTestCase
}

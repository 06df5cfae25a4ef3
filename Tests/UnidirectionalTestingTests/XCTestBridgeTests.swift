import Unidirectional
import UnidirectionalTesting
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// Reported issues fail the running XCTest case (XCTest is the point here).
///
/// The case captures the library's failures instead of failing, and forwards any other failure
/// (its own assertions) to XCTest.
final class XCTestBridgeTests: XCTestCase {
  private let captured = LockIsolated<[(description: String, file: String, line: Int)]>([])

  override func recordFailure(
    withDescription description: String,
    inFile filePath: String,
    atLine lineNumber: Int,
    expected: Bool
  ) {
    if description.contains("An action was sent to a store that has been shut down.")
      || description.contains("A state change does not match expectation")
      || description.contains("has no 'catch' handler")
    {
      self.captured.withValue { $0.append((description, filePath, lineNumber)) }
    } else {
      super.recordFailure(
        withDescription: description,
        inFile: filePath,
        atLine: lineNumber,
        expected: expected
      )
    }
  }

  func testAPlainStoresIssueFailsTheRunningCaseAtTheCallersLine() async {
    let store = Store(initialState: 0) {
      Reduce<Int, Bool> { state, _ in
        state += 1
        return .none
      }
    }
    await store.shutdown()
    let line = #line + 2
    let printed = await capturingStandardError {
      await store.send(true)
    }
    let failures = self.captured.value
    // Outside a case the issue would only be printed; inside one it is also printed when the
    // observer missed the case's start (the `XCTFail` fallback). Either way, never on the console
    // of a passing run.
    XCTAssertTrue(printed.isEmpty || printed.contains("has been shut down"), printed)
    XCTAssertEqual(failures.count, 1)
    XCTAssertTrue(
      failures.first?.description.contains("An action was sent to a store that has been shut down.")
        == true
    )
    // Through the observer the location is the caller's; through the `XCTFail` fallback (when
    // the observer was created during this case) it is in the message.
    XCTAssertTrue(
      failures.first.map {
        $0.line == line || $0.description.contains("XCTestBridgeTests.swift:\(line):")
      }
        == true,
      "\(failures)"
    )
    let state = await store.state
    XCTAssertEqual(state, 0)
  }

  func testATestStoreStateMismatchFailsTheRunningCaseWithADiff() async {
    let store = TestStore(initialState: 0) {
      Reduce<Int, Bool> { state, _ in
        state += 1
        return .none
      }
    }
    let line = #line + 1
    await store.send(true) { $0 = 2 }
    let failures = self.captured.value
    XCTAssertEqual(failures.count, 1)
    XCTAssertEqual(failures.first?.line, line)
    XCTAssertTrue(
      failures.first?.description.contains("−2") == true
        || failures.first?.description.contains("-2") == true,
      "\(failures)"
    )
    XCTAssertTrue(failures.first?.description.contains("+1") == true, "\(failures)")
  }

  func testAPlainStoresUncaughtEffectErrorFailsTheRunningCase() async {
    let store = Store(initialState: 0) {
      Reduce<Int, Bool> { _, _ in .run { _ in throw XCTestMeltdown() } }
    }
    _ = await capturingStandardError {
      await store.send(true).finish()
    }
    let failures = self.captured.value
    XCTAssertEqual(failures.count, 1, "\(failures)")
    let description = failures.first?.description ?? ""
    XCTAssertTrue(description.contains("the reactor melted (code 7)"), description)
    XCTAssertTrue(description.contains("XCTestMeltdown"), description)
    XCTAssertTrue(description.contains("by the action\n    true"), description)
    XCTAssertTrue(description.contains("XCTestBridgeTests.swift:"), description)
  }

  func testAnErrorWithNoDescriptionIsNamedByItsTypeAndCase() async {
    let store = Store(initialState: 0) {
      Reduce<Int, Bool> { _, _ in .run { _ in throw PlainFailure.timedOut(after: 3) } }
    }
    _ = await capturingStandardError {
      await store.send(true).finish()
    }
    let failures = self.captured.value
    XCTAssertEqual(failures.count, 1, "\(failures)")
    let description = failures.first?.description ?? ""
    XCTAssertTrue(description.contains("timedOut(after: 3)"), description)
    XCTAssertTrue(description.contains("UnidirectionalTestingTests.PlainFailure"), description)
  }

  func testATestStoresUncaughtEffectErrorFailsTheRunningCase() async {
    let store = TestStore(initialState: 0) {
      Reduce<Int, Bool> { _, _ in .run { _ in throw XCTestMeltdown() } }
    }
    _ = await capturingStandardError {
      await store.send(true)
      await store.finish()
    }
    let failures = self.captured.value
    XCTAssertEqual(failures.count, 1, "\(failures)")
    XCTAssertTrue(
      failures.first?.description.contains("the reactor melted (code 7)") == true,
      "\(failures)"
    )
  }
}

private struct XCTestMeltdown: Error, CustomStringConvertible {
  var description: String { "the reactor melted (code 7)" }
}

/// Runs `body` with standard error written into a pipe, and returns what it wrote (so a test's
/// deliberate diagnostics never reach the console).
private func capturingStandardError(_ body: () async -> Void) async -> String {
  let saved = dup(STDERR_FILENO)
  var ends: [Int32] = [-1, -1]
  guard saved >= 0, pipe(&ends) == 0 else {
    await body()
    return ""
  }
  dup2(ends[1], STDERR_FILENO)
  close(ends[1])
  await body()
  dup2(saved, STDERR_FILENO)  // closes the pipe's last write end: the read below ends
  close(saved)
  var bytes: [UInt8] = []
  var buffer = [UInt8](repeating: 0, count: 4_096)
  while true {
    let count = read(ends[0], &buffer, buffer.count)
    if count <= 0 { break }
    bytes.append(contentsOf: buffer[..<count])
  }
  close(ends[0])
  return String(decoding: bytes, as: UTF8.self)
}

import Unidirectional
import UnidirectionalTesting
import XCTest

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
    let line = #line + 1
    await store.send(true)
    let failures = self.captured.value
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
}

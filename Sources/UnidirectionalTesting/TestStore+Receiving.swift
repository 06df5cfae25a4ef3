import Unidirectional

extension TestStore {
  // MARK: - Receiving

  /// Asserts that an effect fed back an action matching `predicate` next, and how it changed
  /// the state.
  ///
  /// - Parameters:
  ///   - predicate: Whether the received action is the expected one.
  ///   - timeout: How long to wait for work outside the test store; ``timeout`` by default.
  ///   - updateStateToExpectedResult: Mutates the state before the action into the state
  ///     expected after it.
  ///   - fileID: The file ID of the location issues are reported at (the caller's).
  ///   - filePath: The file path of that source location.
  ///   - line: The line of that source location.
  ///   - column: The column of that source location.
  public func receive(
    where predicate: (Action) -> Bool,
    timeout: Duration? = nil,
    assert updateStateToExpectedResult: ((_ state: inout State) throws -> Void)? = nil,
    fileID: StaticString = #fileID,
    filePath: StaticString = #filePath,
    line: UInt = #line,
    column: UInt = #column
  ) async {
    let location = TestLocation(fileID: fileID, filePath: filePath, line: line, column: column)
    await self.receiveAction(
      matching: predicate,
      mismatch: { received in
        """
        Received unexpected action:

          \(Self.describe(received))

        It does not match the predicate.
        """
      },
      expectedDescription: "an action matching the predicate",
      updateStateToExpectedResult,
      timeout: timeout,
      location: location
    )
  }
}

extension TestStore where Action: Equatable {
  /// Asserts that an effect fed back `expectedAction` next, and how it changed the state.
  ///
  /// ```swift
  /// await clock.advance(by: .seconds(1))
  /// await store.receive(.timerTick) { $0.count = 1 }
  /// ```
  ///
  /// - Parameters:
  ///   - expectedAction: The action expected next.
  ///   - timeout: How long to wait for work outside the test store; ``timeout`` by default.
  ///   - updateStateToExpectedResult: Mutates the state before the action into the state
  ///     expected after it.
  ///   - fileID: The file ID of the location issues are reported at (the caller's).
  ///   - filePath: The file path of that source location.
  ///   - line: The line of that source location.
  ///   - column: The column of that source location.
  public func receive(
    _ expectedAction: Action,
    timeout: Duration? = nil,
    assert updateStateToExpectedResult: ((_ state: inout State) throws -> Void)? = nil,
    fileID: StaticString = #fileID,
    filePath: StaticString = #filePath,
    line: UInt = #line,
    column: UInt = #column
  ) async {
    let location = TestLocation(fileID: fileID, filePath: filePath, line: line, column: column)
    await self.receiveAction(
      matching: { $0 == expectedAction },
      mismatch: { received in
        let diff =
          diffDumps(customDump(expectedAction), customDump(received)) ?? customDump(received)
        return """
          Received unexpected action:

          \(diff.split(separator: "\n", omittingEmptySubsequences: false).map { "  " + $0 }.joined(separator: "\n"))

          (Expected: -, Received: +)
          """
      },
      expectedDescription: Self.describe(expectedAction),
      updateStateToExpectedResult,
      timeout: timeout,
      location: location
    )
  }
}

import Unidirectional

extension TestStore {
  // MARK: - Finishing

  /// Asserts that every effect has finished, waiting up to `timeout` for work outside the test
  /// store.
  public func finish(
    timeout: Duration? = nil,
    fileID: StaticString = #fileID,
    filePath: StaticString = #filePath,
    line: UInt = #line,
    column: UInt = #column
  ) async {
    let location = TestLocation(fileID: fileID, filePath: filePath, line: line, column: column)
    let store = self.store
    let finished = await self.waitForOutsideWork(timeout: timeout ?? self.timeout) {
      store.liveEffectCount == 0
    }
    if self.exhaustivity == .on && !self.received.isEmpty {
      location.report(
        """
        The store received \(Self.count(self.received.count, "unexpected action")):

        \(self.received.map { "  " + Self.describe($0.action) }.joined(separator: "\n"))

        Assert each with 'receive', or call 'skipReceivedActions()'.
        """
      )
      // NB: reported once: the end of the test does not report them again.
      self.skipReceived(showing: nil)
    }
    guard !finished else { return }
    let actions = store.unfinishedEffectOrigins.map { "  " + $0.action }
    location.report(
      """
      Expected effects to finish, but there are still effects in-flight after waiting \
      \(Self.seconds(timeout ?? self.timeout)).

      Started by:
      \(actions.joined(separator: "\n"))

      An effect that waits on a test clock needs 'advance'; one that waits on work outside the \
      test store (a real clock, a socket, 'Task.detached') needs a test dependency.
      """
    )
  }

  /// Drops every action effects fed back that has not been asserted yet.
  public func skipReceivedActions(
    strict: Bool = true,
    fileID: StaticString = #fileID,
    filePath: StaticString = #filePath,
    line: UInt = #line,
    column: UInt = #column
  ) async {
    self.executor.drainUntilIdle()
    self.collectEvents()
    if strict && self.received.isEmpty {
      TestLocation(fileID: fileID, filePath: filePath, line: line, column: column).report(
        "There were no received actions to skip."
      )
    }
    self.skipReceived(showing: nil)
  }

  /// Cancels every effect still running, so the test can end without waiting for them.
  public func skipInFlightEffects(
    strict: Bool = true,
    fileID: StaticString = #fileID,
    filePath: StaticString = #filePath,
    line: UInt = #line,
    column: UInt = #column
  ) async {
    self.executor.drainUntilIdle()
    if strict && self.store.liveEffectCount == 0 {
      TestLocation(fileID: fileID, filePath: filePath, line: line, column: column).report(
        "There were no in-flight effects to skip."
      )
    }
    self.store.cancelAllEffects()
    self.executor.drainUntilIdle()
    self.collectEvents()
  }
}

public import Unidirectional

/// The effects one ``TestStore/send(_:assert:fileID:filePath:line:column:)`` started.
public struct TestStoreTask: Hashable, Sendable {
  /// The store task behind it.
  public let rawValue: StoreTask
  private let executor: ManualExecutor
  private let timeout: Duration
  private let live: @Sendable () -> Int

  init<State, Action>(rawValue: StoreTask, testStore: TestStore<State, Action>) {
    self.rawValue = rawValue
    self.executor = testStore.executor
    self.timeout = testStore.timeout
    let store = testStore.store
    self.live = { store.liveEffectCount }
  }

  /// Cancels the effects and returns once they have reacted to it.
  public func cancel() async {
    self.rawValue.cancel()
    self.executor.drainUntilIdle()
  }

  /// Asserts that the effects finish, waiting up to `timeout` for work outside the test store.
  public func finish(
    timeout: Duration? = nil,
    fileID: StaticString = #fileID,
    filePath: StaticString = #filePath,
    line: UInt = #line,
    column: UInt = #column
  ) async {
    let task = self.rawValue
    _ = await self.executor.drain(waitingAtMost: timeout ?? self.timeout) { task.isFinished }
    guard !self.rawValue.isFinished else { return }
    TestLocation(fileID: fileID, filePath: filePath, line: line, column: column).report(
      """
      Expected the task to finish, but it is still in-flight.

      Its effects may wait on a test clock ('advance' it) or on work outside the test store.
      """
    )
  }

  /// Whether ``cancel()`` was called (or the action started no effects).
  public var isCancelled: Bool {
    self.rawValue.isCancelled
  }

  /// Whether both name the same effects.
  public static func == (lhs: Self, rhs: Self) -> Bool {
    lhs.rawValue == rhs.rawValue
  }

  /// Hashes the identity of the effects.
  public func hash(into hasher: inout Hasher) {
    hasher.combine(self.rawValue)
  }
}

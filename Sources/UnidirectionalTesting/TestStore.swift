import Testing
public import Unidirectional

/// A store for tests that asserts, exhaustively, how state changes and which actions effects
/// feed back.
///
/// ```swift
/// @Test func timer() async {
///   let clock = TestClock()
///   let store = TestStore(initialState: Counter.State()) { Counter(clock: clock) }
///   await store.send(.startTimerTapped) { $0.isTimerRunning = true }
///   await clock.advance(by: .seconds(1))
///   await store.receive(.timerTick) { $0.count = 1 }
///   await store.send(.stopTimerTapped) { $0.isTimerRunning = false }
/// }
/// ```
///
/// Every test store owns a serial executor that only it drains. The store under test, its
/// effects, the default actors those effects call and the `TestClock` wake-ups all run there,
/// so ``send(_:assert:fileID:filePath:line:column:)``, ``receive(_:timeout:assert:fileID:filePath:line:column:)``
/// and `TestClock.advance` return once every effect that can make progress has run until it
/// suspends. No `Task.yield()` or sleep is needed, and a test gives the same result every run.
///
/// With ``exhaustivity`` on (the default), the test fails when a state change is not asserted,
/// when an action an effect fed back is not received, and, when the test store is released at
/// the end of the test, when an effect is still running.
public final class TestStore<State: Equatable & Sendable, Action: Sendable> {
  /// Whether every state change, received action and effect must be asserted.
  public var exhaustivity: Exhaustivity = .on

  /// How long ``receive(_:timeout:assert:fileID:filePath:line:column:)`` and ``finish(timeout:fileID:filePath:line:column:)``
  /// wait for work the test store cannot drive (a real clock, a socket, `Task.detached`).
  ///
  /// Effects that use only injected clocks, streams and actors never wait.
  public var timeout: Duration = .seconds(1)

  /// The order in which the test store runs work that is ready at the same time: ``Scheduling/oldestFirst``
  /// (the default) or ``Scheduling/newestFirst``.
  ///
  /// Effects run concurrently in a real store: two `.run` effects started by two actions can
  /// send their actions in either order. The test store runs one interleaving; by default the
  /// one where ready work runs in the order it became ready, so such effects *appear* ordered.
  /// Run the test again with `.newestFirst` to see the other order: a test that passes both
  /// ways does not depend on an order the store does not promise. Effects that must run in
  /// order say so with `Effect.queued(id:)`, which holds under either scheduling.
  ///
  /// ```swift
  /// let store = TestStore(initialState: Connection.State()) { Connection() }
  /// store.scheduling = .newestFirst
  /// await store.send(.command("inc"))
  /// await store.send(.command("get"))
  /// await store.receive(.reply("ok"))      // fails unless the replies are queued
  /// await store.receive(.reply("1"))
  /// ```
  public var scheduling: Scheduling {
    get { self.executor.runsNewestJobFirst ? .newestFirst : .oldestFirst }
    set { self.executor.runsNewestJobFirst = newValue == .newestFirst }
  }

  /// The order in which a ``TestStore`` runs work that is ready at the same time.
  public enum Scheduling: Sendable, Equatable {
    /// Ready work runs in the order it became ready (the default).
    case oldestFirst
    /// The newest ready work runs first: concurrent effects come out in the other order.
    case newestFirst
  }

  package let store: Store<State, Action>
  let executor: ManualExecutor
  private let events: LockIsolated<[StoreEvent<State, Action>]>
  /// Actions fed back by effects and not yet asserted, with the state after each.
  var received: [StoreEvent<State, Action>] = []
  /// The state after the last asserted (or skipped) action.
  private var assertedState: State
  /// The store's dependencies, as this test store last gave them to it.
  ///
  /// NB: kept here so that reading ``dependencies`` (every state assertion does, to run its
  /// closure under them) is not a task on the executor to ask the store, a hop per assertion. Only
  /// this test store sets the store's dependencies.
  private var storeDependencies: DependencyValues
  private let location: TestLocation

  /// How many times the test store waited for work outside its executor.
  package private(set) var outsideWorkWaits = 0

  /// Creates a test store.
  ///
  /// Dependencies use their `testValue`s (an unimplemented one fails the test when called);
  /// override what the test needs in `prepareDependencies`. The initial state, the reducer and
  /// every state assertion are evaluated under the store's dependencies.
  ///
  /// - Parameters:
  ///   - initialState: The state to start from.
  ///   - reducer: The feature under test.
  ///   - prepareDependencies: Overrides dependencies for the reducer and its effects.
  ///   - fileID: The file ID of the location issues are reported at (the caller's).
  ///   - filePath: The file path of that source location.
  ///   - line: The line of that source location.
  ///   - column: The column of that source location.
  public init<R: Reducer<State, Action>>(
    initialState: @autoclosure () -> State,
    @ReducerBuilder<State, Action> reducer: () -> R,
    withDependencies prepareDependencies: ((inout DependencyValues) -> Void)? = nil,
    fileID: StaticString = #fileID,
    filePath: StaticString = #filePath,
    line: UInt = #line,
    column: UInt = #column
  ) {
    var dependencies = DependencyValues.current
    dependencies.context = .test
    prepareDependencies?(&dependencies)
    let events = LockIsolated<[StoreEvent<State, Action>]>([])
    let executor = ManualExecutor()
    let configuration = StoreConfiguration(
      executorPreference: executor,
      reporter: IssueReporter.current,
      dependencies: dependencies,
      recordsOrigins: true
    )
    let (initialState, store) = Unidirectional.withDependencies {
      $0 = dependencies
    } operation: {
      let initialState = initialState()
      let store = Store(
        initialState: initialState,
        reducer: reducer(),
        configuration: configuration,
        observer: { event in events.withValue { $0.append(event) } }
      )
      return (initialState, store)
    }
    self.executor = executor
    self.events = events
    self.assertedState = initialState
    self.storeDependencies = dependencies
    self.location = TestLocation(fileID: fileID, filePath: filePath, line: line, column: column)
    self.store = store
    _ = XCTestRunObserver.shared
  }

  deinit {
    self.executor.drainUntilIdle()
    self.collectEvents()
    if self.exhaustivity == .on {
      if !self.received.isEmpty {
        self.location.report(
          """
          The store received \(Self.count(self.received.count, "unexpected action")) by the \
          end of this test:

          \(self.received.map { "  " + Self.describe($0.action) }.joined(separator: "\n"))

          Assert each with 'receive', or call 'skipReceivedActions()'.
          """
        )
      }
      for origin in self.store.unfinishedEffectOrigins {
        reportIssue(
          """
          An effect returned for this action is still running. It must complete before the end \
          of the test.

            Action: \(origin.action)

          Make sure every effect this action started ends by the end of the test: cancel it \
          (send the action that cancels it, or 'await task.cancel()'), advance the test clock \
          it waits on, or call 'skipInFlightEffects()'.
          """,
          fileID: origin.fileID,
          filePath: origin.filePath,
          line: origin.line,
          column: origin.column
        )
      }
    }
    // No task outlives the test store: cancel what is left and run it to its end.
    self.store.shutDownEffects()
    self.executor.drainUntilIdle()
  }

  // MARK: - State and dependencies

  /// The state of the store under test as of the last assertion (`send`, `receive`, or a
  /// skip); actions received and not asserted yet are not in it.
  public var state: State {
    self.assertedState
  }

  /// The dependencies the reducer runs under and new effects capture.
  ///
  /// Change them between steps; effects already running keep the dependencies they started
  /// with.
  ///
  /// ```swift
  /// store.dependencies.date = .constant(Date(timeIntervalSince1970: 1))
  /// await store.send(.stamp) { $0.stamp = Date(timeIntervalSince1970: 1) }
  /// ```
  public var dependencies: DependencyValues {
    get { self.storeDependencies }
    set {
      self.onExecutor { store in await store.setDependencies(newValue) }
      self.storeDependencies = newValue
    }
  }

  /// Runs `operation` with ``dependencies`` changed by `update`, then restores them.
  @discardableResult
  public func withDependencies<R>(
    _ update: (inout DependencyValues) throws -> Void,
    operation: () async throws -> R
  ) async rethrows -> R {
    let previous = self.dependencies
    defer { self.dependencies = previous }
    var changed = previous
    try update(&changed)
    self.dependencies = changed
    return try await operation()
  }

  /// Runs `operation` with ``exhaustivity`` set to `exhaustivity`, then restores it.
  ///
  /// ```swift
  /// await store.withExhaustivity(.off) {
  ///   await store.send(.login) { $0.isLoggedIn = true }   // only what the test names
  /// }
  /// ```
  @discardableResult
  public func withExhaustivity<R>(
    _ exhaustivity: Exhaustivity,
    operation: () async throws -> R
  ) async rethrows -> R {
    let previous = self.exhaustivity
    defer { self.exhaustivity = previous }
    self.exhaustivity = exhaustivity
    return try await operation()
  }

  /// Runs `operation` with ``exhaustivity`` set to `exhaustivity`, then restores it.
  @discardableResult
  public func withExhaustivity<R>(
    _ exhaustivity: Exhaustivity,
    operation: () throws -> R
  ) rethrows -> R {
    let previous = self.exhaustivity
    defer { self.exhaustivity = previous }
    self.exhaustivity = exhaustivity
    return try operation()
  }

  /// Asserts the current ``state``: the closure mutates a copy into what the state should be.
  ///
  /// Most useful with ``exhaustivity`` off, after ``skipReceivedActions(strict:fileID:filePath:line:column:)``
  /// or ``finish(timeout:fileID:filePath:line:column:)``:
  ///
  /// ```swift
  /// store.exhaustivity = .off
  /// await store.send(.child(.closeTapped))
  /// await store.skipReceivedActions()
  /// store.assert { $0.child = nil }
  /// ```
  public func assert(
    _ updateStateToExpectedResult: (_ state: inout State) throws -> Void,
    fileID: StaticString = #fileID,
    filePath: StaticString = #filePath,
    line: UInt = #line,
    column: UInt = #column
  ) {
    let location = TestLocation(fileID: fileID, filePath: filePath, line: line, column: column)
    let actual = self.assertedState
    var expected = actual
    do {
      try self.underDependencies { try updateStateToExpectedResult(&expected) }
    } catch {
      location.report("The state assertion threw an error: \(error)")
      return
    }
    guard expected != actual else { return }
    let diff = diffDumps(customDump(expected), customDump(actual)) ?? customDump(actual)
    location.report(
      """
      A state change does not match expectation:

      \(Self.indent(diff))

      (Expected: -, Actual: +)
      """
    )
  }

  /// Runs `body` on the test store's executor, draining until it has returned.
  private func onExecutor<T: Sendable>(
    _ body: @escaping @Sendable (Store<State, Action>) async -> T
  ) -> T {
    let store = self.store
    let result = LockIsolated<T?>(nil)
    Task(executorPreference: self.executor) {
      result.setValue(await body(store))
    }
    self.executor.drainUntilIdle()
    guard let value = result.value else {
      preconditionFailure("The test store's executor did not run a store call to its end.")
    }
    return value
  }

  /// Runs `body` under the store's dependencies (state assertions, as in the Composable
  /// Architecture, may read them).
  private func underDependencies<R>(_ body: () throws -> R) rethrows -> R {
    let dependencies = self.dependencies
    return try Unidirectional.withDependencies {
      $0 = dependencies
    } operation: {
      try body()
    }
  }

  // MARK: - Sending

  /// Sends an action and asserts how it changes the state.
  ///
  /// Returns once the action, the actions it sent synchronously and every effect that can make
  /// progress have run until they suspend.
  ///
  /// - Parameters:
  ///   - action: The action to send.
  ///   - updateStateToExpectedResult: Mutates the state before the action into the state
  ///     expected after it. Omit it when the state should not change.
  ///   - fileID: The file ID of the location issues are reported at (the caller's).
  ///   - filePath: The file path of that source location.
  ///   - line: The line of that source location.
  ///   - column: The column of that source location.
  /// - Returns: The effects the action started, to cancel or await.
  @discardableResult
  public func send(
    _ action: Action,
    assert updateStateToExpectedResult: ((_ state: inout State) throws -> Void)? = nil,
    fileID: StaticString = #fileID,
    filePath: StaticString = #filePath,
    line: UInt = #line,
    column: UInt = #column
  ) async -> TestStoreTask {
    let location = TestLocation(fileID: fileID, filePath: filePath, line: line, column: column)
    self.executor.drainUntilIdle()
    self.collectEvents()
    if !self.received.isEmpty {
      if self.exhaustivity == .on {
        // NB: the actions stay pending (as in the Composable Architecture): the test can still
        // receive them, and the end of the test reports them if it does not.
        location.report(
          """
          Must handle \(Self.count(self.received.count, "received action")) before sending an \
          action:

          \(self.received.map { "  " + Self.describe($0.action) }.joined(separator: "\n"))

          Assert each with 'receive', or call 'skipReceivedActions()'.
          """
        )
      } else {
        self.skipReceived(showing: "received")
      }
    }
    let store = self.store
    let task = await self.executor.perform {
      await store.send(
        action,
        fileID: fileID,
        filePath: filePath,
        line: line,
        column: column
      )
    }
    let events = self.events.withValue { events in
      defer { events = [] }
      return events
    }
    // NB: pending actions kept above stay first, in the order they were received.
    guard let sentIndex = events.firstIndex(where: { $0.origin == .send }) else {
      // The store rejected the action (it was shut down) and reported why.
      self.received.append(contentsOf: events)
      return TestStoreTask(rawValue: task, testStore: self)
    }
    self.received.append(contentsOf: events[..<sentIndex])
    self.received.append(contentsOf: events[(sentIndex + 1)...])
    let sent = events[sentIndex]
    self.assertState(
      after: sent.state,
      updateStateToExpectedResult,
      label: "A state change does not match expectation",
      location: location
    )
    return TestStoreTask(rawValue: task, testStore: self)
  }

  // MARK: - Internals

  func receiveAction(
    matching predicate: (Action) -> Bool,
    mismatch: (Action) -> String,
    expectedDescription: String,
    _ updateStateToExpectedResult: ((inout State) throws -> Void)?,
    timeout: Duration?,
    location: TestLocation
  ) async {
    let exhaustive = self.exhaustivity == .on
    let found = await self.waitForOutsideWork(timeout: timeout ?? self.timeout) {
      exhaustive ? !self.received.isEmpty : self.received.contains { predicate($0.action) }
    }
    guard found else {
      var message = "Expected to receive \(expectedDescription), but received none."
      if !exhaustive, !self.received.isEmpty {
        message =
          "Expected to receive \(expectedDescription), but none of the \(Self.count(self.received.count, "received action")) matched."
      }
      if self.store.liveEffectCount > 0 {
        message += """
          \n\nEffects are still running after waiting \(Self.seconds(timeout ?? self.timeout)): \
          they may be waiting on a test clock ('advance' it) or on work outside the test store \
          (a real clock, a socket, 'Task.detached'), which the test store cannot drive.
          """
      }
      location.report(message)
      return
    }
    if !exhaustive {
      while let first = self.received.first, !predicate(first.action) {
        self.skip(self.received.removeFirst(), showing: "received")
      }
    }
    let event = self.received.removeFirst()
    if exhaustive, !predicate(event.action) {
      // One failure for one mistake: the state is not asserted against the wrong action.
      location.report(mismatch(event.action))
      self.assertedState = event.state
      return
    }
    self.assertState(
      after: event.state,
      updateStateToExpectedResult,
      label: "State change does not match expectation",
      location: location
    )
  }

  /// Compares the state after an action with the asserted expectation, then makes the actual
  /// state the base of the next assertion.
  private func assertState(
    after actual: State,
    _ update: ((inout State) throws -> Void)?,
    label: String,
    location: TestLocation
  ) {
    let before = self.assertedState
    defer { self.assertedState = actual }
    var expected = self.exhaustivity == .on ? before : actual
    do {
      if let update {
        try self.underDependencies { try update(&expected) }
      }
    } catch {
      location.report("The state assertion threw an error: \(error)")
      return
    }
    if expected == actual {
      if self.exhaustivity == .on, update != nil, actual == before {
        location.report(
          """
          Expected the state to change, but no change occurred.

          The trailing closure made no observable change to the state. If no change is \
          expected, omit the trailing closure.
          """
        )
      }
      return
    }
    let title =
      update == nil && self.exhaustivity == .on
      ? "State was not expected to change, but a change occurred"
      : label
    let diff = diffDumps(customDump(expected), customDump(actual)) ?? customDump(actual)
    location.report(
      """
      \(title):

      \(Self.indent(diff))

      (Expected: -, Actual: +)
      """
    )
  }

  /// Waits until `condition` holds, draining the executor whenever work outside it enqueues a
  /// job; gives up after `timeout`.
  func waitForOutsideWork(
    timeout: Duration,
    until condition: () -> Bool
  ) async -> Bool {
    self.executor.drainUntilIdle()
    self.collectEvents()
    if condition() { return true }
    guard self.store.liveEffectCount > 0, timeout > .zero else { return false }
    self.outsideWorkWaits += 1
    let store = self.store
    return await self.executor.drain(
      waitingAtMost: timeout,
      until: {
        self.collectEvents()
        return condition()
      },
      orStopWhen: { store.liveEffectCount == 0 }
    )
  }

  /// Moves the events the store recorded into ``received`` (actions from effects).
  func collectEvents() {
    let events = self.events.withValue { events in
      defer { events = [] }
      return events
    }
    self.received.append(contentsOf: events)
  }

  func skipReceived(showing verb: String?) {
    for event in self.received { self.skip(event, showing: verb) }
    self.received = []
  }

  private func skip(_ event: StoreEvent<State, Action>, showing verb: String?) {
    if let verb, case .off(showSkippedAssertions: true) = self.exhaustivity {
      print("Skipped assertion: \(verb) \(Self.describe(event.action))")
    }
    self.assertedState = event.state
  }

  static func describe(_ action: Action) -> String {
    customDump(action).replacingNewlines()
  }

  static func count(_ count: Int, _ noun: String) -> String {
    count == 1 ? "1 \(noun)" : "\(count) \(noun)s"
  }

  static func seconds(_ duration: Duration) -> String {
    let (seconds, attoseconds) = duration.components
    let value = Double(seconds) + Double(attoseconds) / 1e18
    return "\(value) s"
  }

  private static func indent(_ text: String) -> String {
    text.split(separator: "\n", omittingEmptySubsequences: false)
      .map { "  " + $0 }
      .joined(separator: "\n")
  }
}

/// The test store type of a feature `R`: `TestStoreOf<Counter>` is
/// `TestStore<Counter.State, Counter.Action>`.
public typealias TestStoreOf<R: Reducer> = TestStore<R.State, R.Action>
where R.State: Equatable & Sendable

/// Where a test store method was called, for failures.
struct TestLocation {
  var fileID: StaticString
  var filePath: StaticString
  var line: UInt
  var column: UInt

  func report(_ message: String) {
    reportIssue(
      message,
      fileID: "\(self.fileID)",
      filePath: "\(self.filePath)",
      line: Int(self.line),
      column: Int(self.column)
    )
  }
}

extension String {
  /// The text on one line (newlines and their indentation become single spaces).
  fileprivate func replacingNewlines() -> String {
    self.split(separator: "\n").map { $0.trimmingPrefix(while: \.isWhitespace) }.joined(
      separator: " "
    )
    .replacing("( ", with: "(").replacing(" )", with: ")")
    .replacing("[ ", with: "[").replacing(" ]", with: "]")
  }
}

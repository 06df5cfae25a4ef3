/// The runtime of a feature: it holds the state, reduces actions one at a time, and runs the
/// effects reducers return.
///
/// ```swift
/// let store = Store(initialState: Counter.State()) { Counter() }
/// let task = await store.send(.startTimerTapped)
/// print(await store.state.isTimerRunning)   // true
/// task.cancel()
/// await store.shutdown()
/// ```
///
/// - Actions are processed one at a time, in the order they reach the store, each exactly once.
///   Actions from ``Effect/send(_:)`` are reduced before ``send(_:fileID:filePath:line:column:)``
///   returns, in an iterative loop.
/// - Every effect runs as a structured child of one task the store owns; no task outlives the
///   store's ``shutdown()``, and releasing the last reference to a store cancels its effects.
/// - Once the store has processed a cancellation, no action from the cancelled effects reaches a
///   reducer; the check happens on the store when the action arrives.
/// - Effect bodies run off the store, concurrently with the reducer.
public actor Store<State: Sendable, Action: Sendable> {
  // Safety: an immutable reference, readable anywhere; the core itself is only *used* on this
  // store's executor (shared by its root and every scoped store). `scope` reads it off the
  // executor only to hand it to the scoped store's core.
  @usableFromInline nonisolated(unsafe) let core: StoreCore<State, Action>
  /// `core` when this is a root store: the per-action path calls it directly, specialized.
  // Safety: as for `core`: an immutable reference, only used on the store's executor.
  @usableFromInline nonisolated(unsafe) let root: RootCore<State, Action>?
  @usableFromInline nonisolated let anchor: ExecutorAnchor
  @usableFromInline nonisolated let ownedRuntime: EffectRuntime?
  /// The effect bookkeeping of the root store (shared by its scoped stores).
  @usableFromInline nonisolated let runtime: EffectRuntime

  /// The executor of the root store's anchor, which all its scoped stores share.
  public nonisolated var unownedExecutor: UnownedSerialExecutor {
    self.anchor.unownedExecutor
  }

  /// Creates a store.
  ///
  /// ```swift
  /// let store = Store(initialState: Feature.State()) {
  ///   Feature()
  /// } withDependencies: {
  ///   $0.continuousClock = ImmediateClock()
  /// }
  /// ```
  ///
  /// - Parameters:
  ///   - initialState: The state to start from.
  ///   - reducer: The feature's reducer.
  ///   - prepareDependencies: Overrides dependencies for the reducer and every effect it returns,
  ///     on top of the dependencies in force where the store is created.
  @inlinable
  public init<R: Reducer<State, Action>>(
    initialState: State,
    @ReducerBuilder<State, Action> reducer: () -> R,
    withDependencies prepareDependencies: ((inout DependencyValues) -> Void)? = nil
  ) {
    var dependencies = DependencyValues._inherited()
    prepareDependencies?(&dependencies)
    self.init(
      root: RootCore.make(
        initialState: initialState,
        reducer: reducer(),
        configuration: StoreConfiguration(dependencies: dependencies),
        observer: nil
      )
    )
  }

  /// Creates a root store with a test or benchmark configuration.
  @inlinable
  package init<R: Reducer<State, Action>>(
    initialState: State,
    reducer: R,
    configuration: StoreConfiguration,
    observer: (@Sendable (StoreEvent<State, Action>) -> Void)? = nil
  ) {
    self.init(
      root: RootCore.make(
        initialState: initialState,
        reducer: reducer,
        configuration: configuration,
        observer: observer
      )
    )
  }

  /// Creates a root store around its core (made, specialized, by the inlinable initializers in
  /// the feature's module).
  @usableFromInline
  init(root: RootCore<State, Action>) {
    self.anchor = ExecutorAnchor()
    self.ownedRuntime = root.runtime
    self.runtime = root.runtime
    self.root = root
    self.core = root
  }

  /// Creates a store that shares its root's executor and effects (``scope(state:action:)``).
  @usableFromInline
  init(anchor: ExecutorAnchor, core: StoreCore<State, Action>) {
    self.anchor = anchor
    self.ownedRuntime = nil
    self.runtime = core.runtime
    self.core = core
    self.root = nil
  }

  deinit {
    self.ownedRuntime?.shutdown()
    // NB: nothing else can use the core now (sending needs a reference to the store), and
    // effects only reach it through the link.
    self.root?.deliveryLink?.sever()
  }

  // MARK: - Using a store

  /// The current state.
  public var state: State {
    self.core.state
  }

  /// Sends an action: reduces it (and the actions it sends synchronously) and starts the effects
  /// the reducer returned.
  ///
  /// Sending to a store that was shut down reports an issue, leaves the state untouched and
  /// returns a finished task.
  ///
  /// - Parameter action: The action.
  /// - Returns: The lifetime of the effects this action started.
  @inlinable
  @discardableResult
  public func send(
    _ action: Action,
    fileID: StaticString = #fileID,
    filePath: StaticString = #filePath,
    line: UInt = #line,
    column: UInt = #column
  ) -> StoreTask {
    let location = SourceLocation(fileID: fileID, filePath: filePath, line: line, column: column)
    guard let root = self.root else {
      return self.core.send(action, location: location)
    }
    if !root.isAttached {
      root.attach(to: self)
    }
    return root.sendPath(root, action, location)
  }

  /// Cancels every effect, waits until all of them have ended, and rejects later actions.
  ///
  /// After `shutdown()` returns no task the store started is running. Later
  /// ``send(_:fileID:filePath:line:column:)`` calls report an issue and return a finished task;
  /// ``states`` sequences end. Shutting down a scoped store shuts down its root.
  public func shutdown() async {
    await self.core.shutdown()
  }

  /// Shuts down gracefully: rejects new actions, lets running effects finish for up to
  /// `gracePeriod`, then cancels the rest.
  ///
  /// The grace period is measured on `clock`, by default the store's `continuousClock`
  /// dependency (so a ``TestClock`` makes it exact in tests). Actions the finishing effects send
  /// are still reduced. An effect that ignores cancellation for another `gracePeriod` is
  /// reported as an issue, and `shutdown` returns instead of hanging on it.
  ///
  /// ```swift
  /// await store.shutdown(gracePeriod: .seconds(5))   // e.g. on SIGTERM
  /// ```
  public func shutdown(gracePeriod: Duration, clock: (any Clock<Duration>)? = nil) async {
    await self.core.shutdown(gracePeriod: gracePeriod, clock: clock)
  }

  /// Whether ``shutdown()`` was called.
  public var isShutDown: Bool {
    self.core.isShutDown
  }

  // MARK: - Package hooks

  /// The number of effects started and not finished.
  package nonisolated var liveEffectCount: Int {
    self.runtime.liveEffectCount
  }

  /// What started the effects still running, in the order the actions were sent (only when the
  /// configuration records origins).
  package nonisolated var unfinishedEffectOrigins: [EffectOrigin] {
    self.runtime.unfinishedOrigins()
  }

  /// Cancels every running effect, leaving the store open (only when the configuration records
  /// origins).
  package nonisolated func cancelAllEffects() {
    self.runtime.cancelAllEffects()
  }

  /// Cancels every effect and rejects later effects without waiting (the test store's teardown,
  /// which then drains its executor until they have ended).
  package nonisolated func shutDownEffects() {
    self.runtime.shutdown()
  }

  /// The number of cancellation identifiers with registered effects.
  package nonisolated var registeredIdentifierCount: Int {
    self.runtime.registeredIdentifierCount
  }
}

/// The location of a call, as the `#fileID`-style values tools report.
@usableFromInline
struct SourceLocation: Sendable {
  @usableFromInline var fileID: StaticString
  @usableFromInline var filePath: StaticString
  @usableFromInline var line: UInt
  @usableFromInline var column: UInt

  @inlinable
  init(fileID: StaticString, filePath: StaticString, line: UInt, column: UInt) {
    self.fileID = fileID
    self.filePath = filePath
    self.line = line
    self.column = column
  }
}

/// Not API: the default actor whose executor a root store and its scoped stores share.
///
/// A store implements `unownedExecutor` (so scoped stores can share it), which makes it a
/// non-default actor; borrowing an anchor's executor keeps the default-actor scheduling, which
/// also follows a task's executor preference (SE-0417), the property the test store relies on.
@usableFromInline
actor ExecutorAnchor {
  @usableFromInline init() {}

  /// Delivers an action from an effect to the core of the store running on this executor.
  @inlinable
  func deliver<State, Action>(
    _ action: Action,
    from box: EffectBox,
    to core: UncheckedCore<State, Action>
  ) {
    core.core.receivePath(core.core, action, box)
  }
}

/// How a root store is set up beyond its state and reducer.
@usableFromInline
package struct StoreConfiguration: Sendable {
  /// The executor the store's root task, and so every effect, prefers.
  package var executorPreference: (any TaskExecutor)?
  /// Where the store reports issues.
  package var reporter: IssueReporter
  /// The dependencies of the reducer and its effects.
  @usableFromInline package var dependencies: DependencyValues
  /// Whether lifetimes record the action that started them (for test diagnostics).
  package var recordsOrigins: Bool
  /// Mutation-testing switch, `false` only in the test proving the oracle can fail: skips the
  /// delivery-time check that drops actions from cancelled effects.
  package var checksDelivery = true

  @usableFromInline
  package init(
    executorPreference: (any TaskExecutor)? = nil,
    reporter: IssueReporter = IssueReporter.current,
    dependencies: DependencyValues = DependencyValues._inherited(),
    recordsOrigins: Bool = false
  ) {
    self.executorPreference = executorPreference
    self.reporter = reporter
    self.dependencies = dependencies
    self.recordsOrigins = recordsOrigins
  }
}

/// One action a store processed, reported to a test harness.
@usableFromInline
package struct StoreEvent<State, Action> {
  @usableFromInline package typealias Origin = StoreEventOrigin

  package let action: Action
  package let state: State
  package let origin: Origin

  @usableFromInline
  init(action: Action, state: State, origin: Origin) {
    self.action = action
    self.state = state
    self.origin = origin
  }
}

/// Where an action a store processed came from.
@usableFromInline
package enum StoreEventOrigin: Sendable {
  /// Passed to `Store.send`.
  case send
  /// Fed back by an effect (`.send` or a running effect).
  case effect
}

extension StoreEvent: Sendable where State: Sendable, Action: Sendable {}

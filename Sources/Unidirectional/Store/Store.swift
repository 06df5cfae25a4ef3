// NB: `final`, though no actor can be subclassed: without it, a call from another module went
// through the class's method table to the generic, unspecialized method (the `@inlinable` body
// unused), which looked up metadata at run time (a registry's send-and-read: 3.0-3.5x its floor,
// 1.65-1.73x final).

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
/// - Every effect runs in a task the store owns: the store counts it until it ends, cancels it by
///   id, lifetime or shutdown, and no task outlives the store's ``shutdown()``; releasing the
///   last reference to a store cancels its effects.
/// - Once the store has processed a cancellation, no action from the cancelled effects reaches a
///   reducer; the check happens on the store when the action arrives.
/// - Effect bodies run off the store, concurrently with the reducer.
public final actor Store<State: Sendable, Action: Sendable> {
  // NB: the core itself is only *used* on this store's executor (shared by its root and every
  // scoped store). Nonisolated code reads it only to hand it to a scoped store's core (`scope`)
  // or to read its supervisor, an atomic, set-once reference (`RootCore.supervisorReference`).
  // Safety: an immutable reference, readable anywhere; used only as said above.
  @usableFromInline nonisolated(unsafe) let core: any StoreCore<State, Action>
  /// `core` when this is a root store: the per-action path calls it directly, specialized.
  ///
  /// Unretained: `core` holds the same object for the store's whole life. A strong reference
  /// here was retained and released around every send; this one is lent to the call instead
  /// (`_withUnsafeGuaranteedRef`).
  // Safety: as for `core`; and `core`, a `let` holding this same object, keeps it alive as long
  // as the store, so this reference never outlives what it points to.
  @usableFromInline nonisolated(unsafe) let rootReference: Unmanaged<RootCore<State, Action>>?

  /// `core` when this is a root store.
  @usableFromInline nonisolated var root: RootCore<State, Action>? {
    self.rootReference?.takeUnretainedValue()
  }
  /// The executor of the root store's ``StoreIsolation``, kept alive by the root core.
  @usableFromInline nonisolated let executor: UnownedSerialExecutor

  /// The executor of the root store, which all its scoped stores share.
  public nonisolated var unownedExecutor: UnownedSerialExecutor {
    self.executor
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
  /// The initial state and the reducer are made under the store's dependencies (those in force here
  /// plus `prepareDependencies`), so they can read them.
  ///
  /// - Parameters:
  ///   - initialState: The state to start from.
  ///   - reducer: The feature's reducer.
  ///   - prepareDependencies: Overrides dependencies for the reducer and every effect it returns,
  ///     on top of the dependencies in force where the store is created.
  ///   - isolation: Where the closures run: the caller's isolation (so a store can be created on
  ///     the main actor with closures that capture main-actor state). Leave the default.
  @inlinable
  public init<R: Reducer<State, Action>>(
    initialState: @autoclosure () -> State,
    @ReducerBuilder<State, Action> reducer: () -> R,
    withDependencies prepareDependencies: ((inout DependencyValues) -> Void)? = nil,
    isolation: isolated (any Actor)? = #isolation
  ) {
    self.init(
      root: Self.makeRoot(
        initialState: initialState,
        storeObserver: nil,
        reducer: reducer,
        withDependencies: prepareDependencies
      )
    )
  }

  /// Creates a root store whose actions, state changes, effects, issues and shutdown `observer`
  /// watches (see ``StoreObserver``).
  ///
  /// ```swift
  /// let store = Store(initialState: Connection.State(), observer: RequestLog()) {
  ///   Connection()
  /// }
  /// ```
  ///
  /// - Parameters:
  ///   - initialState: The state to start from.
  ///   - observer: Watches the store, and every store scoped from it.
  ///   - reducer: The feature's reducer.
  ///   - prepareDependencies: Overrides dependencies for the reducer and every effect it returns,
  ///     on top of the dependencies in force where the store is created.
  ///   - isolation: Where the closures run: the caller's isolation. Leave the default.
  @inlinable
  public init<R: Reducer<State, Action>, O: StoreObserver<State, Action>>(
    initialState: @autoclosure () -> State,
    observer: O,
    @ReducerBuilder<State, Action> reducer: () -> R,
    withDependencies prepareDependencies: ((inout DependencyValues) -> Void)? = nil,
    isolation: isolated (any Actor)? = #isolation
  ) {
    self.init(
      root: Self.makeRoot(
        initialState: initialState,
        storeObserver: observer,
        reducer: reducer,
        withDependencies: prepareDependencies
      )
    )
  }

  /// The two public initializers' body: the state and the reducer, made in the caller's isolation
  /// under the store's dependencies, and the root core around them.
  ///
  /// NB: the initializers take the caller's isolation (`isolation: isolated (any Actor)?`) and run
  /// the closures here, before the store exists: an actor initializer's arguments are otherwise
  /// *sent* into the new actor, and a closure formed on the main actor (in a `@main` program or a
  /// `@MainActor` test) cannot be sent, so `Store(initialState:) { Feature() }` did not compile
  /// there (`StoreTests.aStoreIsCreatedFromTheMainActor`).
  @inlinable
  static func makeRoot<R: Reducer<State, Action>>(
    initialState: () -> State,
    storeObserver: (any StoreObserver<State, Action>)?,
    reducer: () -> R,
    withDependencies prepareDependencies: ((inout DependencyValues) -> Void)?
  ) -> RootCore<State, Action> {
    var dependencies = DependencyValues._inherited()
    prepareDependencies?(&dependencies)
    let (state, reducer) = DependencyValues.withValues(dependencies) {
      (initialState(), reducer())
    }
    return RootCore.make(
      initialState: state,
      reducer: reducer,
      configuration: StoreConfiguration(dependencies: dependencies),
      observer: nil,
      storeObserver: storeObserver
    )
  }

  /// Creates a root store with a test or benchmark configuration.
  @inlinable
  package init<R: Reducer<State, Action>>(
    initialState: State,
    reducer: R,
    configuration: StoreConfiguration,
    observer: (@Sendable (StoreEvent<State, Action>) -> Void)? = nil,
    storeObserver: (any StoreObserver<State, Action>)? = nil
  ) {
    self.init(
      root: RootCore.make(
        initialState: initialState,
        reducer: reducer,
        configuration: configuration,
        observer: observer,
        storeObserver: storeObserver
      )
    )
  }

  /// Creates a root store around its core (made, specialized, by the inlinable initializers in the
  /// feature's module).
  @usableFromInline
  init(root: RootCore<State, Action>) {
    self.executor = root.isolation.unownedExecutor
    self.rootReference = Unmanaged.passUnretained(root)
    self.core = root
  }

  /// Creates a store that shares a root's executor and effects (``scope(state:action:)``).
  @usableFromInline
  init(core: any StoreCore<State, Action>, executor: UnownedSerialExecutor) {
    self.executor = executor
    self.rootReference = nil
    self.core = core
  }

  deinit {
    // Releasing a root store cancels its effects; once they have ended, the last effect task
    // lets go of the core. Nothing else can use the store now: sending needs a reference to it.
    self.root?.supervisor?.shutDownOffTheStore()
    self.root?.notifyShutDown()
  }

  // MARK: - Using a store

  /// The current state.
  public var state: State {
    self.core.state
  }

  /// Sends an action: reduces it (and the actions it sends synchronously) and starts the effects
  /// the reducer returned.
  ///
  /// Sending to a store that was shut down reports an issue, leaves the state untouched and returns
  /// a finished task.
  ///
  /// - Parameters:
  ///   - action: The action.
  ///   - fileID: The file ID of the location issues are reported at (the caller's).
  ///   - filePath: The file path of that source location.
  ///   - line: The line of that source location.
  ///   - column: The column of that source location.
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
    guard let root = self.rootReference else {
      return self.core.send(action, location: location)
    }
    return root._withUnsafeGuaranteedRef { root in root.sendAction(root, action, location) }
  }

  /// Sends an action and reads the state right after it (and the `.send` actions it chains) was
  /// reduced, before any other action.
  ///
  /// ```swift
  /// let total = await store.send(.add(item), reading: { $0.total })
  /// ```
  ///
  /// Sending to a store that was shut down reports an issue (as
  /// ``send(_:fileID:filePath:line:column:)`` does) and reads the unchanged state.
  ///
  /// - Parameters:
  ///   - action: The action.
  ///   - read: Reads a value from the state once the action was reduced.
  ///   - fileID: The file ID of the location issues are reported at (the caller's).
  ///   - filePath: The file path of that source location.
  ///   - line: The line of that source location.
  ///   - column: The column of that source location.
  /// - Returns: The value `read` returned.
  @inlinable
  public func send<Value: Sendable>(
    _ action: Action,
    reading read: @Sendable (State) -> Value,
    fileID: StaticString = #fileID,
    filePath: StaticString = #filePath,
    line: UInt = #line,
    column: UInt = #column
  ) -> Value {
    self.send(action, fileID: fileID, filePath: filePath, line: line, column: column)
    return read(self.core.state)
  }

  /// Sends an action if the store accepts it and reads the state right after it was reduced:
  /// `nil`, quietly, once the store is shutting down or shut down.
  ///
  /// - Parameters:
  ///   - action: The action.
  ///   - read: Reads a value from the state once the action was reduced.
  /// - Returns: The action's task and the value read, or `nil` if the action was rejected.
  @inlinable
  public func trySend<Value: Sendable>(
    _ action: Action,
    reading read: @Sendable (State) -> Value
  ) -> (task: StoreTask, value: Value)? {
    guard let task = self.trySend(action) else { return nil }
    return (task, read(self.core.state))
  }

  /// Sends an action if the store accepts it: `nil`, quietly, once the store is shutting down or
  /// shut down.
  ///
  /// For code that expects rejections, such as a server still receiving requests while it shuts
  /// down; ``send(_:fileID:filePath:line:column:)`` reports them as issues.
  ///
  /// ```swift
  /// guard let task = await store.trySend(.request(line)) else {
  ///   return reply("error: shutting down")
  /// }
  /// ```
  ///
  /// - Parameters:
  ///   - action: The action.
  ///   - fileID: The file ID of the location issues are reported at (the caller's).
  ///   - filePath: The file path of that source location.
  ///   - line: The line of that source location.
  ///   - column: The column of that source location.
  /// - Returns: The lifetime of the effects the action started, or `nil` if it was rejected.
  @inlinable
  @discardableResult
  public func trySend(
    _ action: Action,
    fileID: StaticString = #fileID,
    filePath: StaticString = #filePath,
    line: UInt = #line,
    column: UInt = #column
  ) -> StoreTask? {
    let location = SourceLocation(fileID: fileID, filePath: filePath, line: line, column: column)
    guard let root = self.rootReference else {
      return self.core.trySend(action, location: location)
    }
    return root._withUnsafeGuaranteedRef { root in
      root.isClosed ? nil : root.sendAction(root, action, location)
    }
  }

  /// ``trySend(_:fileID:filePath:line:column:)`` that holds back the effect tasks the action
  /// starts, for the caller to start on its own thread once it has left the store's executor
  /// (``EffectStarts/start()``).
  ///
  /// The registry's sends use it: a request's `.run` that ends without suspending then costs no
  /// enqueue and no thread wake-up.
  @inlinable
  package func trySendStartingEffectsHere(
    _ action: Action
  ) -> (task: StoreTask, starts: EffectStarts)? {
    // NB: no `Optional.map` closures: this runs unspecialized (an actor method called from
    // another isolation), where each closure cost a context and metadata lookups. A send already
    // holding starts on this thread (none can today: reducers do not send) keeps them.
    PlanScratch.withCurrent { scratch in
      if scratch.isHoldingStarts {
        guard let task = self.trySend(action) else { return nil }
        return (task, EffectStarts())
      }
      scratch.isHoldingStarts = true
      let task = self.trySend(action)
      scratch.isHoldingStarts = false
      guard let task else { return nil }
      return (task, scratch.takeHeldStarts())
    }
  }

  /// ``trySend(_:reading:)`` that holds back the effect tasks the action starts, as
  /// ``trySendStartingEffectsHere(_:)`` does.
  ///
  /// NB: inlinable, as the other one is, so the registry's send-and-read is specialized in the
  /// caller's module: generic there, it instantiated tuple metadata at run time on every request.
  @inlinable
  package func trySendStartingEffectsHere<Value: Sendable>(
    _ action: Action,
    reading read: @Sendable (State) -> Value
  ) -> (task: StoreTask, value: Value, starts: EffectStarts)? {
    PlanScratch.withCurrent { scratch in
      if scratch.isHoldingStarts {
        guard let sent = self.trySend(action, reading: read) else { return nil }
        return (sent.task, sent.value, EffectStarts())
      }
      scratch.isHoldingStarts = true
      let sent = self.trySend(action, reading: read)
      scratch.isHoldingStarts = false
      guard let sent else { return nil }
      return (sent.task, sent.value, scratch.takeHeldStarts())
    }
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
  /// The grace period is measured on `clock`, by default the store's `continuousClock` dependency
  /// (so a ``TestClock`` makes it exact in tests). Actions the finishing effects send are still
  /// reduced. An effect that ignores cancellation for another `gracePeriod` (at least one second,
  /// so a zero grace period still waits for cancelled effects to end) is reported as an issue, and
  /// `shutdown` returns instead of hanging on it.
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
    self.core.supervisor?.liveCount ?? 0
  }

  /// What started the effects still running, in the order the actions were sent (only when the
  /// configuration records origins).
  package nonisolated var unfinishedEffectOrigins: [EffectOrigin] {
    self.core.supervisor?.unfinishedOrigins ?? []
  }

  /// Cancels every running effect, leaving the store open.
  package nonisolated func cancelAllEffects() {
    self.core.supervisor?.cancelAll()
  }

  /// Cancels every effect and rejects later effects without waiting (the test store's teardown,
  /// which then drains its executor until they have ended).
  package nonisolated func shutDownEffects() {
    self.core.supervisor?.shutDownOffTheStore()
  }

  /// The number of cancellation identifiers with registered effects.
  ///
  /// Ids with a debounce timer, and ids with throttle state (tests of bounded memory).
  package nonisolated var timingStateCounts: (debounces: Int, throttles: Int) {
    self.core.supervisor?.timingStateCounts ?? (0, 0)
  }

  package nonisolated var registeredIdentifierCount: Int {
    self.core.supervisor?.registeredIdentifierCount ?? 0
  }

  /// Replaces the dependencies the reducer runs under and new effects capture.
  package func setDependencies(_ dependencies: DependencyValues) {
    self.root?.dependencies = DependencyBox.make(dependencies)
  }
}

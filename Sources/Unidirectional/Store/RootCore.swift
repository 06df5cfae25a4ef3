import Synchronization

/// The core of a root store: the state, the reducer, the queue of synchronous actions, and the way
/// into its effects (``EffectSupervisor``, made with the first effect).
///
/// The per-action path (`sendNow`, `receive`, `process`, `reduce`) is `@inlinable`, so it is
/// specialized for the feature's `State` and `Action` in the module that creates the store.
/// Unspecialized generic code across the module boundary looked up generic metadata on every action
/// (most of the cost of a `send`). Actor methods called from outside are not specialized
/// across modules, so ``Store`` reaches this path through ``sendAction``, a closure formed in that
/// module by ``make(initialState:reducer:configuration:observer:)``.
///
/// Its mutable fields skip dynamic exclusivity checks (`@exclusivity(unchecked)`): they are only
/// touched on the store's executor, one action at a time, and no access overlaps another (the
/// reducer receives `currentState` inout and cannot reach the core). `.ci/run` stage 6b checks
/// that on a copy without the attribute; the checks cost every `send` (`Benchmarks/HISTORY.md`).
@usableFromInline
final class RootCore<State: Sendable, Action: Sendable>: StoreCore, PhasedShutdown {
  @usableFromInline @exclusivity(unchecked) var currentState: State
  @usableFromInline let reducer: (inout State, Action) -> Effect<Action>
  /// `sendNow(_:location:)`, formed specialized in the feature's module.
  ///
  /// A constant closure that captures nothing (the core is an argument), so calling it costs no
  /// reference counting.
  @usableFromInline let sendAction: (RootCore, Action, SourceLocation) -> StoreTask
  /// `receive(_:from:)`, formed specialized like `sendAction`: ``StoreIsolation`` is a generic
  /// actor, and its isolated method runs unspecialized when an effect calls it from another module
  /// (every delivery then looked up generic metadata).
  @usableFromInline let receiveAction: (RootCore, Action, any EffectUnit) -> Void
  /// The executor this core runs on, and how effects reach it.
  @usableFromInline let isolation: StoreIsolation<State, Action>
  /// How effects reach ``isolation``.
  ///
  /// A `let`, made with the core: the per-action path borrows it. A delivery made per plan, or a
  /// `var` set with the first effect, was retained and released on every action with an effect.
  @usableFromInline let delivery: EffectDelivery<Action>

  /// The dependencies the reducer runs under (installed around every reduce) and its effects
  /// capture.
  ///
  /// Replaceable between test steps.
  @usableFromInline @exclusivity(unchecked) var dependencies: DependencyBox {
    didSet { self.dependenciesPointer = Unmanaged.passUnretained(self.dependencies).toOpaque() }
  }
  /// `dependencies`, unretained: what a reduce installs, with no reference counting.
  @usableFromInline @exclusivity(unchecked) var dependenciesPointer: UnsafeMutableRawPointer
  /// The public observer (``StoreObserver``), or one that does nothing (then ``isObserved`` is
  /// `false`); when there is one, ``extras`` is set too.
  ///
  /// NB: not optional: a call on a `let` existential opens it in place, while unwrapping an
  /// optional one copied the observer out and destroyed the copy, through its value witnesses, on
  /// every reduce.
  @usableFromInline let publicObserver: any StoreObserver<State, Action>
  /// A custom issue reporter, observers, a test executor and test switches; `nil` for a plain
  /// store, which is then smaller and checks one field per reduce.
  @usableFromInline let extras: RootCoreExtras<State, Action>?

  /// Actions sent synchronously (`.send`), reduced in order before `send` returns.
  @usableFromInline @exclusivity(unchecked) var queue: [(Action, EffectToken?)] = []
  @usableFromInline @exclusivity(unchecked) var queueHead = 0
  /// `queue.count`, kept as a plain integer so the `.none` path never touches the array.
  @usableFromInline @exclusivity(unchecked) var queueCount = 0

  /// What the effects of the action being processed register and run.
  @usableFromInline @exclusivity(unchecked) var planner = EffectPlanner<Action>()
  /// Set once, with the first effect; read without the lock by the package hooks.
  let supervisorReference = AtomicLazyReference<EffectSupervisor>()
  /// The same supervisor, for the per-action path on the store's executor: a plain load (the
  /// atomic's `load` is not specialized across modules, and a re-arm reads it).
  ///
  /// Unretained, and lent to each use (`_withUnsafeGuaranteedRef`): a strong `var` was copied,
  /// retained and released, every time an action planned an effect, since the planner might have
  /// reached the field through `self`.
  // Safety: `supervisorReference` holds the same object from the moment this is set (it is set
  // from what `storeIfNil` returned) until the core is freed, and the reference is never reset.
  @usableFromInline @exclusivity(unchecked) var effectsReference: Unmanaged<EffectSupervisor>?
  /// Created by the first `states` reader (most stores never have one: it saves memory).
  @usableFromInline @exclusivity(unchecked) var broadcaster: StateBroadcaster<State>?
  // NB: the flags sit together: apart, each took a word of padding, and 8 bytes put an idle store
  // one malloc size class up (16 B).
  /// Whether ``isolation`` holds this core (from the first asynchronous effect on).
  @usableFromInline @exclusivity(unchecked) var isReachableByEffects = false
  @usableFromInline @exclusivity(unchecked) var isClosed = false
  /// Set by ``shutdown()``: effects' actions are dropped too.
  @usableFromInline @exclusivity(unchecked) var hasShutDown = false
  /// Whether the store has a public observer (``publicObserver`` is not the one doing nothing).
  @usableFromInline let isObserved: Bool

  @usableFromInline
  init(
    initialState: State,
    reducer: @escaping (inout State, Action) -> Effect<Action>,
    configuration: StoreConfiguration,
    observer: (@Sendable (StoreEvent<State, Action>) -> Void)?,
    storeObserver: (any StoreObserver<State, Action>)?,
    sendAction: @escaping (RootCore, Action, SourceLocation) -> StoreTask,
    receiveAction: @escaping (RootCore, Action, any EffectUnit) -> Void
  ) {
    self.currentState = initialState
    self.reducer = reducer
    let isolation = StoreIsolation<State, Action>()
    self.isolation = isolation
    self.delivery = EffectDelivery(receiver: isolation)
    self.sendAction = sendAction
    self.receiveAction = receiveAction
    let dependencies = DependencyBox.make(configuration.dependencies)
    self.dependencies = dependencies
    self.dependenciesPointer = Unmanaged.passUnretained(dependencies).toOpaque()
    let reporter: IssueReporter
    if let storeObserver {
      let configured = configuration.reporter
      reporter = IssueReporter { issue in
        storeObserver.issueReported(issue)
        configured(issue)
      }
    } else {
      reporter = configuration.reporter
    }
    self.publicObserver = storeObserver ?? NoStoreObserver<State, Action>()
    self.isObserved = storeObserver != nil
    let isPlain =
      storeObserver == nil && observer == nil && configuration.executorPreference == nil
      && !configuration.recordsOrigins && configuration.checksDelivery && reporter.isDefault
      && configuration.cancelsTimers
    self.extras =
      isPlain
      ? nil
      : RootCoreExtras(
        reporter: reporter,
        observer: observer,
        stateComparison: storeObserver == nil ? nil : makeStateComparison(State.self),
        executorPreference: configuration.executorPreference,
        recordsOrigins: configuration.recordsOrigins,
        checksDelivery: configuration.checksDelivery,
        cancelsTimers: configuration.cancelsTimers
      )
  }

  /// Creates a root core and its specialized entry points, in the caller's module.
  @inlinable
  static func make<R: Reducer<State, Action>>(
    initialState: State,
    reducer: R,
    configuration: StoreConfiguration,
    observer: (@Sendable (StoreEvent<State, Action>) -> Void)?,
    storeObserver: (any StoreObserver<State, Action>)? = nil
  ) -> RootCore {
    RootCore(
      initialState: initialState,
      reducer: { state, action in reducer.reduce(into: &state, action: action) },
      configuration: configuration,
      observer: observer,
      storeObserver: storeObserver,
      sendAction: { core, action, location in core.sendNow(action, location: location) },
      receiveAction: { core, action, unit in core.receive(action, from: unit) }
    )
  }

  @usableFromInline
  var state: State {
    self.currentState
  }

  /// Numbers origins in the order their actions were sent.
  func nextOriginSequence() -> Int {
    guard let extras = self.extras else { return 0 }
    extras.originCount &+= 1
    return extras.originCount
  }

  /// Where the store reports issues.
  @usableFromInline
  var reporter: IssueReporter {
    self.extras?.reporter ?? .default
  }

  @usableFromInline
  var isShutDown: Bool {
    self.isClosed
  }

  @usableFromInline
  var supervisor: EffectSupervisor? {
    self.supervisorReference.load()
  }

  /// The supervisor, once the first effect made it; see ``effectsReference``.
  @usableFromInline
  var effects: EffectSupervisor? {
    self.effectsReference?.takeUnretainedValue()
  }

  @usableFromInline var phasedShutdown: any PhasedShutdown {
    self
  }

  // MARK: - Sending

  @usableFromInline
  func send(_ action: Action, location: SourceLocation) -> StoreTask {
    self.sendAction(self, action, location)
  }

  @usableFromInline
  func trySend(_ action: Action, location: SourceLocation) -> StoreTask? {
    guard !self.isClosed else { return nil }
    return self.sendAction(self, action, location)
  }

  @inlinable
  func sendNow(_ action: Action, location: SourceLocation) -> StoreTask {
    guard !self.isClosed else {
      self.reportSendAfterShutdown(action, location: location)
      return StoreTask()
    }
    self.process(action, origin: .send)
    if !self.planner.isEmpty {
      self.submitPlanned()
    } else if self.planner.holdsScratch {
      self.planner.returnScratch()
    }
    // NB: a send whose only effect re-armed a timer in place planned nothing, and has a lifetime.
    guard let lifetime = self.planner.lifetime else { return StoreTask() }
    self.planner.lifetime = nil
    if self.extras?.recordsOrigins == true {
      self.recordOrigin(of: lifetime, action: action, location: location)
    }
    return StoreTask(lifetime: lifetime, supervisor: self.effects)
  }

  /// Reduces an action an effect sent, unless the effect was cancelled (the delivery rule, checked
  /// here, on the store's executor, when the action arrives) or has already finished (misuse:
  /// reported and dropped).
  @inlinable
  func receive(_ action: Action, from token: any EffectUnit) {
    let flags = token.loadFlags()
    if flags & UnitFlags.cancelled != 0 && (self.extras?.checksDelivery ?? true) { return }
    if flags & UnitFlags.finished != 0 {
      if flags & UnitFlags.cancelled == 0 { reportSendAfterFinish(action, to: self.reporter) }
      return
    }
    guard !self.hasShutDown else { return }
    self.planner.source = token
    self.process(action, origin: .effect)
    if !self.planner.isEmpty {
      self.submitPlanned()
    } else if self.planner.holdsScratch {
      self.planner.returnScratch()
    }
    self.planner.source = nil
    if self.planner.lifetime != nil { self.planner.lifetime = nil }
  }

  /// Reduces `action`, then every action it sent synchronously, iteratively.
  @inlinable
  func process(_ action: Action, origin: StoreEventOrigin) {
    self.reduce(action, origin: origin)
    while self.queueHead < self.queueCount {
      if !self.planner.steps.isEmpty {
        // NB: a cancellation planned so far must reach a cancellable `.send` before it runs.
        self.applyPlannedSteps()
      }
      let (next, token) = self.queue[self.queueHead]
      self.queueHead += 1
      if let token {
        if token.isCancelled { continue }
        self.reduce(next, origin: .immediate)
        self.effectsReference?._withUnsafeGuaranteedRef { $0.complete(token) }
      } else {
        self.reduce(next, origin: .immediate)
      }
    }
    if self.queueCount > 0 {
      self.queue.removeAll(keepingCapacity: true)
      self.queueHead = 0
      self.queueCount = 0
    }
  }

  @inlinable
  func reduce(_ action: Action, origin: StoreEventOrigin) {
    var effect: Effect<Action>
    // NB: `!= nil`, not `if let`: binding the reference copies it, a retain and release per reduce
    // on the observed path; reading a `let` field of `self` borrows it.
    if self.extras != nil {
      effect = self.reduceObserved(action, origin: origin)
    } else {
      let previous = ReducerDependencies.install(self.dependenciesPointer)
      effect = self.reducer(&self.currentState, action)
      ReducerDependencies.restore(previous)
      if let broadcaster = self.broadcaster, broadcaster.hasSubscribers {
        broadcaster.publish(self.currentState)
      }
    }
    switch effect.operation {
    case .none:
      return
    case .send(let next):
      self.queue.append((next, nil))
      self.queueCount += 1
      return
    default:
      break
    }
    // NB: handed over, not copied: a timer's payload that nothing else holds becomes its record.
    self.plan(&effect, for: action)
  }

  /// Reduces with observers: the public one hears of the action and the state change, then
  /// `states` readers get the state, then the test harness the event.
  @inlinable @inline(__always)
  func reduceObserved(_ action: Action, origin: StoreEventOrigin) -> Effect<Action> {
    let previous = ReducerDependencies.install(self.dependenciesPointer)
    let effect: Effect<Action>
    if self.isObserved {
      let oldState = self.currentState
      effect = self.reducer(&self.currentState, action)
      ReducerDependencies.restore(previous)
      self.notifyObserver(reduced: action, origin: origin, oldState: oldState)
    } else {
      effect = self.reducer(&self.currentState, action)
      ReducerDependencies.restore(previous)
    }
    if let broadcaster = self.broadcaster, broadcaster.hasSubscribers {
      broadcaster.publish(self.currentState)
    }
    if let observer = self.extras?.observer {
      observer(StoreEvent(action: action, state: self.currentState, origin: origin))
    }
    return effect
  }

  /// Tells the observer about a reduced action and the state change.
  ///
  /// NB: inlinable, so it is specialized with the store: generic, it copied the old and new
  /// states through run-time value witnesses on every observed action.
  @inlinable @inline(__always)
  func notifyObserver(reduced action: Action, origin: StoreEventOrigin, oldState: State) {
    let actionOrigin: ActionOrigin
    switch origin {
    case .send: actionOrigin = .send
    case .immediate: actionOrigin = .immediate
    case .effect:
      actionOrigin = self.planner.source.map { .effect(EffectReference($0)) } ?? .immediate
    }
    self.publicObserver.actionReduced(action, origin: actionOrigin)
    if let isEqual = self.extras?.stateComparison, isEqual(oldState, self.currentState) { return }
    self.publicObserver.stateChanged(from: oldState, to: self.currentState)
  }

  /// Tells the observer, once, that the store shut down.
  func notifyShutDown() {
    guard let storeObserver = self.storeObserver, let extras = self.extras,
      !extras.hasNotifiedShutDown
    else { return }
    extras.hasNotifiedShutDown = true
    storeObserver.storeShutDown()
  }

  @inlinable
  func plan(_ effect: inout Effect<Action>, for reduced: Action) {
    let supervisor = self.effectsReference ?? self.makeSupervisor()
    if !self.planner.holdsScratch { self.planner.borrowScratch() }
    // NB: the closure captures the core unretained (it runs inside this call): capturing `self`
    // retained and released it around every plan.
    let core = Unmanaged.passUnretained(self)
    supervisor._withUnsafeGuaranteedRef { supervisor in
      self.planner.plan(
        taking: &effect,
        delivery: self.delivery,
        supervisor: supervisor,
        action: reduced
      ) { action, token in
        core._withUnsafeGuaranteedRef { core in
          core.queue.append((action, token))
          core.queueCount += 1
        }
      }
    }
  }

  /// Applies the registrations and cancellations planned so far, without submitting jobs.
  @usableFromInline
  func applyPlannedSteps() {
    self.effectsReference?._withUnsafeGuaranteedRef { $0.applySteps(&self.planner.steps) }
  }

  /// Applies everything planned for the action just processed and hands its jobs to the root task:
  /// one lock for the whole action.
  ///
  /// NB: inlinable, so it is specialized with the store: generic, it looked up the core's type
  /// metadata to reach the planner on every action with an effect.
  @inlinable
  func submitPlanned() {
    defer { if self.planner.holdsScratch { self.planner.returnScratch() } }
    guard let supervisor = self.effectsReference else { return }
    if !(self.planner.jobs.isEmpty && self.planner.timers.isEmpty) && !self.isReachableByEffects {
      // From now on effects may deliver: the isolation holds this core until the root task,
      // once the store has shut down, lets it go.
      self.isReachableByEffects = true
      // Safety: this runs on the isolation's executor (the store's), the only place the core
      // is used; `assumeIsolated` checks that.
      nonisolated(unsafe) let core = self
      self.isolation.assumeIsolated { $0.root = core }
    }
    supervisor._withUnsafeGuaranteedRef { supervisor in
      Self.submit(&self.planner, to: supervisor)
    }
  }

  /// Hands what `planner` collected to `supervisor`: one access to the stored planner (passing
  /// `&self.planner.steps` and `.jobs` to one call overlapped two, which exclusivity forbids).
  @inlinable
  static func submit(_ planner: inout EffectPlanner<Action>, to supervisor: EffectSupervisor) {
    supervisor.apply(&planner.steps, jobs: &planner.jobs)
    if !planner.timers.isEmpty { supervisor.arm(&planner.timers) }
  }

  @usableFromInline
  func makeSupervisor() -> Unmanaged<EffectSupervisor> {
    let isolation = self.isolation
    let supervisor = EffectSupervisor(
      executorPreference: self.extras?.executorPreference,
      reporter: self.reporter,
      observer: self.storeObserver,
      clock: self.storeObserver == nil ? nil : self.dependencies.values.continuousClock,
      cancelsTimers: self.extras?.cancelsTimers ?? true,
      // NB: asked when the first effect starts, not at creation: a store that never runs an
      // effect does not pay for the test framework's task-local lookup.
      inheritsTaskContext: TestFrameworkLink.isTestRunning,
      effectsEnded: { await isolation.release() }
    )
    let stored = Unmanaged.passUnretained(self.supervisorReference.storeIfNil(supervisor))
    self.effectsReference = stored
    return stored
  }

  @usableFromInline
  func recordOrigin(of lifetime: any EffectUnit, action: Action, location: SourceLocation) {
    self.supervisor?.setOrigin(
      EffectOrigin(sequence: self.nextOriginSequence(), action: action, location: location),
      of: lifetime
    )
  }

  // MARK: - Shutting down

  @usableFromInline
  func shutdown() async {
    defer { self.notifyShutDown() }
    self.close()
    self.hasShutDown = true
    guard let supervisor = self.supervisor else { return }
    if supervisor.isCurrentEffect {
      // Called by one of this store's own effects: waiting for every effect would wait for the
      // caller. Wait for the others; the caller is cancelled, and its task lets go of the core
      // when it ends.
      supervisor.shutDown()
      await supervisor.waitUntilOthersEnded()
      return
    }
    if !supervisor.shutDown() { await supervisor.waitUntilEnded() }
    self.releaseFromEffects()
  }

  /// Lets effects' deliveries stop reaching this core (they have all ended), so a `Send` kept
  /// past its effect does not keep the state alive.
  func releaseFromEffects() {
    guard self.isReachableByEffects else { return }
    // Safety: shutting down runs on the isolation's executor (the store's); `assumeIsolated`
    // checks that.
    self.isolation.assumeIsolated { $0.release() }
  }

  @usableFromInline
  func shutdown(gracePeriod: Duration, clock: (any Clock<Duration>)?) async {
    // 1. Reject sends; let running effects finish (their actions are still reduced).
    guard self.closeForShutdown() else { return }
    let clock = clock ?? self.shutdownClock
    guard let supervisor = self.supervisor else {
      self.cancelForShutdown()
      self.completeShutdown(effectsEnded: true, gracePeriod: gracePeriod)
      return
    }
    if supervisor.isCurrentEffect {
      await self.shutdownFromOwnEffect(supervisor, gracePeriod: gracePeriod, clock: clock)
      return
    }
    var ended = supervisor.isIdle
    if !ended && gracePeriod > .zero {
      ended = await firstToFinish(
        { await supervisor.waitUntilIdle() },
        orAfter: gracePeriod,
        on: clock
      )
    }
    // 2. Cancel what is left, and stop.
    self.cancelForShutdown()
    // 3. Give cancelled effects the same grace (at least a second) to end; report the ones that
    // ignore it. NB: a zero grace period still lets cancellation reach every effect.
    ended = ended || supervisor.isIdle
    if !ended {
      ended = await firstToFinish(
        { await supervisor.waitUntilIdle() },
        orAfter: max(gracePeriod, Self.cancellationGrace),
        on: clock
      )
    }
    if !ended && supervisor.liveCount == 0 {
      // Only tasks with nothing left to run (their units were cancelled before they started).
      await supervisor.waitUntilEnded()
      ended = true
    }
    self.completeShutdown(effectsEnded: ended, gracePeriod: gracePeriod)
  }

  /// A graceful shutdown called by one of this store's own effects: the same phases, waiting for
  /// the *other* effects (the caller's task is cancelled with the rest and ends after it returns).
  private func shutdownFromOwnEffect(
    _ supervisor: EffectSupervisor,
    gracePeriod: Duration,
    clock: any Clock<Duration>
  ) async {
    if gracePeriod > .zero {
      _ = await supervisor.waitUntilOthersEnded(orAfter: gracePeriod, on: clock)
    }
    self.hasShutDown = true
    supervisor.shutDown()
    await supervisor.waitUntilOthersEnded()
    self.notifyShutDown()
  }

  /// The public observer, if any.
  var storeObserver: (any StoreObserver<State, Action>)? {
    self.isObserved ? self.publicObserver : nil
  }

  /// How long cancelled effects have to end, at least, before a graceful shutdown reports them.
  static var cancellationGrace: Duration { .seconds(1) }

  // MARK: - Scoping and states

  @usableFromInline
  func scoped<ChildState: Sendable, ChildAction: Sendable>(
    state: WritableKeyPath<State, ChildState>,
    embed: @escaping @Sendable (ChildAction) -> Action
  ) -> any StoreCore<ChildState, ChildAction> {
    ScopedCore(root: self, state: state, embed: embed)
  }

  @usableFromInline
  func subscribeToStates() -> StateSubscription<State>? {
    guard !self.isClosed else { return nil }
    let broadcaster: StateBroadcaster<State>
    if let existing = self.broadcaster {
      broadcaster = existing
    } else {
      broadcaster = StateBroadcaster<State>()
      self.broadcaster = broadcaster
    }
    return broadcaster.subscribe(current: self.currentState)
  }

  // MARK: - Diagnostics

  @usableFromInline
  func reportSendAfterShutdown(_ action: Action, location: SourceLocation) {
    location.report(
      """
      An action was sent to a store that has been shut down.

        Action:
          \(debugDescription(of: action))

      The action was not reduced and the state is unchanged. Make sure nothing sends to the \
      store after 'shutdown()', or use 'trySend' where a rejection is expected.
      """
    )
  }

}

/// Reports an action sent through the `Send` of an effect that has returned.
@usableFromInline
func reportSendAfterFinish<Action>(_ action: Action, to reporter: IssueReporter) {
  reporter(
    ReportedIssue(
      """
      An action was sent from a completed effect.

        Action:
          \(debugDescription(of: action))

      The action was not reduced. Avoid sending with the 'send' argument of 'Effect.run' \
      after the effect has returned, for example from a task the effect started and did not \
      wait for: make sure 'run' does not return until it is done calling 'send'.
      """
    )
  )
}

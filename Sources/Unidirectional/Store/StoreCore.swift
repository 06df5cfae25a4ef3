/// The implementation behind a ``Store``: a root, or a scope of one.
///
/// Cores are not `Sendable`: a core is only used on the executor of its root store (which every
/// scoped store shares), from the isolated methods of the store that owns it.
@usableFromInline
class StoreCore<State: Sendable, Action: Sendable> {
  /// The effect bookkeeping of the root store.
  @usableFromInline let runtime: EffectRuntime

  @usableFromInline
  init(runtime: EffectRuntime) {
    self.runtime = runtime
  }

  var state: State {
    preconditionFailure("Not API: overridden by every core.")
  }

  var isShutDown: Bool {
    preconditionFailure("Not API: overridden by every core.")
  }

  /// Tells the core which store owns it, before the first action. A store cannot hand out
  /// `self` from its initializer, so it does this from its first isolated call.
  @usableFromInline
  func attach(to store: Store<State, Action>) {}

  @usableFromInline
  func send(_ action: Action, location: SourceLocation) -> StoreTask {
    preconditionFailure("Not API: overridden by every core.")
  }

  func shutdown() async {
    preconditionFailure("Not API: overridden by every core.")
  }

  func shutdown(gracePeriod: Duration, clock: (any Clock<Duration>)?) async {
    preconditionFailure("Not API: overridden by every core.")
  }

  /// The core of a store scoped from the store that owns this core.
  func scoped<ChildState: Sendable, ChildAction: Sendable>(
    by store: Store<State, Action>,
    state: WritableKeyPath<State, ChildState>,
    embed: @escaping @Sendable (ChildAction) -> Action
  ) -> StoreCore<ChildState, ChildAction> {
    preconditionFailure("Not API: overridden by every core.")
  }

  func subscribeToStates() -> StateSubscription<State>? {
    preconditionFailure("Not API: overridden by every core.")
  }
}

/// The core of a root store: the state, the reducer, the synchronous queue and the effects.
///
/// NB: the per-action path (`send`, `receive`, `process`, `reduce`) is `@inlinable`, so it is
/// specialized for the feature's `State` and `Action` in the module that creates the store.
/// Unspecialized, generic code across the module boundary looked up generic metadata on every
/// action (measured: most of the cost of a `send`).
///
/// Its mutable fields skip dynamic exclusivity checks (`@exclusivity(unchecked)`): they are
/// only touched on the store's executor, one action at a time, and no access overlaps another
/// (the reducer receives `currentState` inout and cannot reach the core). The checks were
/// ~15% of a `send`.
@usableFromInline
final class RootCore<State: Sendable, Action: Sendable>: StoreCore<State, Action> {
  @usableFromInline @exclusivity(unchecked) var currentState: State
  @usableFromInline let reducer: (inout State, Action) -> Effect<Action>
  /// Created by the first `states` reader (most stores never have one: it saves memory).
  @usableFromInline @exclusivity(unchecked) var broadcaster: StateBroadcaster<State>?
  let reporter: IssueReporter
  /// Bound around the reducer (and inherited by effects) when they differ from the defaults.
  @usableFromInline let dependencies: DependencyValues?
  @usableFromInline let observer: (@Sendable (StoreEvent<State, Action>) -> Void)?
  @usableFromInline let recordsOrigins: Bool
  @usableFromInline let checksDelivery: Bool

  /// Actions sent synchronously (`.send`), reduced in order before `send` returns.
  @usableFromInline @exclusivity(unchecked) var queue: [(Action, EffectBox?)] = []
  @usableFromInline @exclusivity(unchecked) var queueHead = 0
  /// `queue.count`, kept as a plain integer so the `.none` path never touches the array.
  @usableFromInline @exclusivity(unchecked) var queueCount = 0

  @usableFromInline @exclusivity(unchecked) var scheduler: EffectScheduler<Action>
  @usableFromInline @exclusivity(unchecked) var shutDown = false
  /// Set by a graceful shutdown: sends are rejected while effects finish.
  @usableFromInline @exclusivity(unchecked) var isClosing = false
  /// The clock a graceful shutdown measures its grace period on (the store's dependency).
  let clock: any Clock<Duration>
  /// Whether effects know which store to deliver to (set on the first send).
  @usableFromInline @exclusivity(unchecked) var isAttached = false
  /// Actions passed to `send` so far (orders effect origins in diagnostics).
  @usableFromInline @exclusivity(unchecked) var sendCount = 0
  /// `sendNow(_:location:)` and `receiveNow(_:from:)`, as closures formed where the store was
  /// created (`make`): there they are specialized for the concrete `State` and `Action`.
  /// Actor methods are not specialized across modules when called from outside the actor, but
  /// closures formed in specialized code stay specialized. They capture nothing (the core is
  /// an argument) and are constants, so a call costs no reference counting.
  @usableFromInline let sendPath: (RootCore, Action, SourceLocation) -> StoreTask
  @usableFromInline let receivePath: (RootCore, Action, EffectBox) -> Void
  /// How effects deliver to the owning store, formed (specialized) with the paths above: each
  /// action an effect sends goes through it.
  @usableFromInline let deliverPath:
    (ExecutorAnchor, DeliveryLink<State, Action>) -> @Sendable (Action, EffectBox) async -> Void
  /// What effects deliver through: this core, until its store is released (set on the first
  /// effect).
  @usableFromInline @exclusivity(unchecked) var deliveryLink: DeliveryLink<State, Action>?
  /// The anchor of the store that owns this core (set on attach).
  @usableFromInline @exclusivity(unchecked) var anchor: ExecutorAnchor?

  @usableFromInline
  init(
    initialState: State,
    reducer: @escaping (inout State, Action) -> Effect<Action>,
    runtime: EffectRuntime,
    configuration: StoreConfiguration,
    observer: (@Sendable (StoreEvent<State, Action>) -> Void)?,
    sendPath: @escaping (RootCore, Action, SourceLocation) -> StoreTask,
    receivePath: @escaping (RootCore, Action, EffectBox) -> Void,
    deliverPath: @escaping (ExecutorAnchor, DeliveryLink<State, Action>) -> @Sendable (Action, EffectBox) async -> Void
  ) {
    self.sendPath = sendPath
    self.receivePath = receivePath
    self.deliverPath = deliverPath
    self.currentState = initialState
    self.reducer = reducer
    self.reporter = configuration.reporter
    self.dependencies =
      configuration.dependencies.isDefault ? nil : configuration.dependencies
    self.observer = observer
    self.recordsOrigins = configuration.recordsOrigins
    self.clock = configuration.dependencies.continuousClock
    self.checksDelivery = configuration.checksDelivery
    self.scheduler = EffectScheduler(runtime: runtime, deliver: { _, _ in })
    super.init(runtime: runtime)
  }

  override var state: State {
    self.currentState
  }

  override var isShutDown: Bool {
    self.shutDown
  }

  /// Creates a root core, its runtime, and its specialized per-action closures.
  @inlinable
  static func make<R: Reducer<State, Action>>(
    initialState: State,
    reducer: R,
    configuration: StoreConfiguration,
    observer: (@Sendable (StoreEvent<State, Action>) -> Void)?
  ) -> RootCore {
    RootCore(
      initialState: initialState,
      reducer: { state, action in reducer.reduce(into: &state, action: action) },
      runtime: Self.makeRuntime(configuration),
      configuration: configuration,
      observer: observer,
      sendPath: { core, action, location in core.sendNow(action, location: location) },
      receivePath: { core, action, box in core.receiveNow(action, from: box) },
      deliverPath: { anchor, link in
        { action, box in
          guard let core = link.core else { return }
          await anchor.deliver(action, from: box, to: UncheckedCore(core))
        }
      }
    )
  }

  @usableFromInline
  static func makeRuntime(_ configuration: StoreConfiguration) -> EffectRuntime {
    EffectRuntime(
      executorPreference: configuration.executorPreference,
      reporter: configuration.reporter,
      dependencies: configuration.dependencies,
      tracksLifetimes: configuration.recordsOrigins
    )
  }

  /// Records the store that owns this core; effects deliver through its anchor.
  @inlinable
  override func attach(to store: Store<State, Action>) {
    self.isAttached = true
    self.anchor = store.anchor
  }

  /// Sets where effects deliver their actions, on the first effect: a store that never runs
  /// one never allocates the link (about 100 bytes and 3 allocations per store).
  @usableFromInline
  func installDelivery() {
    guard let anchor = self.anchor else { return }
    let link = DeliveryLink(self)
    self.deliveryLink = link
    var scheduler = EffectScheduler(runtime: self.runtime, deliver: self.deliverPath(anchor, link))
    scheduler.lifetime = self.scheduler.lifetime
    scheduler.jobs = self.scheduler.jobs
    self.scheduler = scheduler
  }

  override func send(_ action: Action, location: SourceLocation) -> StoreTask {
    self.sendPath(self, action, location)
  }

  @inlinable
  func sendNow(_ action: Action, location: SourceLocation) -> StoreTask {
    guard !self.shutDown && !self.isClosing else {
      self.reportSendAfterShutdown(action, location: location)
      return StoreTask(nil)
    }
    self.sendCount &+= 1
    self.process(action, origin: .send)
    let lifetime = self.scheduler.submit()
    if self.recordsOrigins, let lifetime {
      self.recordOrigin(of: lifetime, action: action, location: location)
    }
    return StoreTask(lifetime)
  }

  @usableFromInline
  func recordOrigin(of lifetime: EffectLifetime, action: Action, location: SourceLocation) {
    self.runtime.setOrigin(
      EffectOrigin(
        sequence: self.sendCount,
        action: debugDescription(of: action),
        fileID: "\(location.fileID)",
        filePath: "\(location.filePath)",
        line: Int(location.line),
        column: Int(location.column)
      ),
      of: lifetime
    )
  }

  @inlinable
  func receiveNow(_ action: Action, from box: EffectBox) {
    // The delivery rule: checked here, on the store's executor, when the action arrives.
    guard !box.isCancelled || !self.checksDelivery, !self.shutDown else { return }
    self.scheduler.lifetime = box.lifetime
    self.process(action, origin: .effect)
    _ = self.scheduler.submit()
  }

  /// Reduces `action`, then every action it sent synchronously, iteratively.
  @inlinable
  func process(_ action: Action, origin: StoreEventOrigin) {
    self.reduce(action, origin: origin)
    while self.queueHead < self.queueCount {
      let (next, box) = self.queue[self.queueHead]
      self.queueHead += 1
      if let box {
        if box.isCancelled {
          self.runtime.abandon(box)
          continue
        }
        self.reduce(next, origin: .effect)
        self.runtime.complete(box)
      } else {
        self.reduce(next, origin: .effect)
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
    let effect: Effect<Action>
    if let dependencies = self.dependencies {
      effect = self.reduce(action, with: dependencies)
    } else {
      effect = self.reducer(&self.currentState, action)
    }
    if let broadcaster = self.broadcaster, broadcaster.hasSubscribers {
      broadcaster.publish(self.currentState)
    }
    if let observer = self.observer {
      observer(StoreEvent(action: action, state: self.currentState, origin: origin))
    }
    switch effect.operation {
    case .none:
      return
    case .send(let next):
      self.queue.append((next, nil))
      self.queueCount += 1
    default:
      if self.deliveryLink == nil {
        self.installDelivery()
      }
      self.scheduler.schedule(effect) { action, box in
        self.queue.append((action, box))
        self.queueCount += 1
      }
    }
  }

  /// Runs the reducer with the store's dependencies bound (and so inherited by its effects).
  @usableFromInline
  func reduce(_ action: Action, with dependencies: DependencyValues) -> Effect<Action> {
    DependencyValues.$current.withValue(dependencies) {
      self.reducer(&self.currentState, action)
    }
  }

  override func shutdown() async {
    if !self.shutDown {
      self.shutDown = true
      self.broadcaster?.finish()
    }
    let root = self.runtime.shutdown()
    await root?.value
  }

  override func shutdown(gracePeriod: Duration, clock: (any Clock<Duration>)?) async {
    guard !self.shutDown else { return }
    let clock = clock ?? self.clock
    let runtime = self.runtime
    // 1. Reject sends; let running effects finish (their actions are still reduced).
    self.isClosing = true
    let finishedInTime = await firstToFinish(
      { await runtime.waitUntilIdle() },
      orAfter: gracePeriod,
      on: clock
    )
    // 2. Cancel what is left, and stop.
    self.shutDown = true
    self.broadcaster?.finish()
    runtime.shutdown()
    if finishedInTime || runtime.liveEffectCount == 0 { return }
    // 3. Give cancelled effects the same grace to end; report the ones that ignore it.
    let ended = await firstToFinish(
      { await runtime.waitUntilIdle() },
      orAfter: gracePeriod,
      on: clock
    )
    if !ended {
      let count = runtime.liveEffectCount
      self.reporter(
        ReportedIssue(
          """
          \(count == 1 ? "1 effect" : "\(count) effects") ignored cancellation and \
          \(count == 1 ? "is" : "are") still running after 'shutdown(gracePeriod: \(gracePeriod))'.

          Shutdown returned instead of waiting for \(count == 1 ? "it" : "them"). An effect \
          should end when its task is cancelled: check 'Task.isCancelled' in loops, and do not \
          swallow 'CancellationError'.
          """,
          fileID: #fileID,
          filePath: #filePath,
          line: #line,
          column: #column
        )
      )
    }
  }

  override func scoped<ChildState: Sendable, ChildAction: Sendable>(
    by store: Store<State, Action>,
    state: WritableKeyPath<State, ChildState>,
    embed: @escaping @Sendable (ChildAction) -> Action
  ) -> StoreCore<ChildState, ChildAction> {
    ScopedCore(rootStore: store, root: self, state: SendableKeyPath(state), embed: embed)
  }

  override func subscribeToStates() -> StateSubscription<State>? {
    guard !self.shutDown else { return nil }
    let broadcaster: StateBroadcaster<State>
    if let existing = self.broadcaster {
      broadcaster = existing
    } else {
      broadcaster = StateBroadcaster<State>()
      self.broadcaster = broadcaster
    }
    return broadcaster.subscribe(current: self.currentState)
  }

  @usableFromInline
  func reportSendAfterShutdown(_ action: Action, location: SourceLocation) {
    self.reporter(
      ReportedIssue(
        """
        An action was sent to a store that has been shut down.

          Action:
            \(debugDescription(of: action))

        The action was not reduced and the state is unchanged. Make sure nothing sends to \
        the store after 'shutdown()'.
        """,
        fileID: "\(location.fileID)",
        filePath: "\(location.filePath)",
        line: Int(location.line),
        column: Int(location.column)
      )
    )
  }
}

/// A short description of a value for diagnostics: enum cases get a leading dot.
func debugDescription(of value: Any) -> String {
  let description = String(describing: value)
  let mirror = Mirror(reflecting: value)
  if mirror.displayStyle == .enum, let first = description.first, first.isLetter {
    return "." + description
  }
  return description
}

/// Runs `operation` against a sleep of `duration` on `clock`; `true` when `operation` finished
/// first. The loser is cancelled.
func firstToFinish(
  _ operation: @escaping @Sendable () async -> Void,
  orAfter duration: Duration,
  on clock: any Clock<Duration>
) async -> Bool {
  await withTaskGroup(of: Bool.self) { group in
    group.addTask {
      await operation()
      return !Task.isCancelled
    }
    group.addTask {
      try? await clock.sleep(for: duration)
      return false
    }
    let first = await group.next() ?? false
    group.cancelAll()
    return first
  }
}

/// A root core crossing into an effect's delivery closure.
///
/// Safety: the core is only unwrapped by `ExecutorAnchor.deliver(_:from:to:)`, which is
/// isolated to the anchor whose executor the core's store runs on, the one executor the core is
/// ever used on; effects only carry it there.
@usableFromInline struct UncheckedCore<State: Sendable, Action: Sendable>: @unchecked Sendable {
  @usableFromInline let core: RootCore<State, Action>

  @inlinable
  init(_ core: RootCore<State, Action>) {
    self.core = core
  }
}

/// How effects reach their store's core without holding the store.
///
/// Effects hold this link, not the store: a weakly referenced object keeps its reference counts
/// in a side table, which made every retain and release of the store (the caller's too) take
/// the runtime's slow path (measured: ~100 ns of a 234 ns delivery). The link holds the core
/// strongly, a cycle (the core keeps the delivery closure) that the store's `deinit` breaks by
/// severing the link; an action arriving after that comes from a cancelled effect, and is
/// dropped here as the core would drop it.
///
/// Safety: `target` is only read and written under `lock`.
@usableFromInline final class DeliveryLink<State: Sendable, Action: Sendable>: @unchecked Sendable {
  private let lock = Lock()
  private var target: RootCore<State, Action>?

  @usableFromInline
  init(_ core: RootCore<State, Action>) {
    self.target = core
  }

  /// The core, or `nil` once the store is gone.
  @usableFromInline var core: RootCore<State, Action>? {
    self.lock.withLock { self.target }
  }

  @usableFromInline
  func sever() {
    let core = self.lock.withLock {
      defer { self.target = nil }
      return self.target
    }
    // NB: released outside the lock: the core's deinit may release effects that deliver.
    _ = consume core
  }
}

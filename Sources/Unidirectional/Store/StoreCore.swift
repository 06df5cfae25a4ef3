/// The implementation behind a ``Store``: a root, or a scope of one.
///
/// Cores are not `Sendable`: a core is only used on the executor of its root store (which every
/// scoped store shares), from the isolated methods of the store that owns it.
class StoreCore<State: Sendable, Action: Sendable> {
  /// The effect bookkeeping of the root store.
  let runtime: EffectRuntime

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
  func attach(to store: Store<State, Action>) {}

  func send(_ action: Action, location: SourceLocation) -> StoreTask {
    preconditionFailure("Not API: overridden by every core.")
  }

  func receive(_ action: Action, from box: EffectBox) {
    preconditionFailure("Not API: overridden by every core.")
  }

  func shutdown() async {
    preconditionFailure("Not API: overridden by every core.")
  }

  func subscribeToStates() -> StateSubscription<State>? {
    preconditionFailure("Not API: overridden by every core.")
  }

  /// The last action passed to `send` (the template key-path-scoped stores embed into).
  var lastAction: Action? {
    nil
  }
}

/// The core of a root store: the state, the reducer, the synchronous queue and the effects.
final class RootCore<State: Sendable, Action: Sendable>: StoreCore<State, Action> {
  private var currentState: State
  private let reducer: (inout State, Action) -> Effect<Action>
  private let broadcaster = StateBroadcaster<State>()
  private let reporter: IssueReporter
  /// Bound around the reducer (and inherited by effects) when they differ from the defaults.
  private let dependencies: DependencyValues?
  private let observer: (@Sendable (StoreEvent<State, Action>) -> Void)?
  private let recordsOrigins: Bool
  private let checksDelivery: Bool

  /// Actions sent synchronously (`.send`), reduced in order before `send` returns.
  private var queue: [(Action, EffectBox?)] = []
  private var queueHead = 0
  /// `queue.count`, kept as a plain integer so the `.none` path never touches the generic array
  /// (unspecialized array code looks up its generic metadata on every call).
  private var queueCount = 0

  private var scheduler: EffectScheduler<Action>
  private var shutDown = false
  /// Actions passed to `send` so far (orders effect origins in diagnostics).
  private var sendCount = 0
  private var lastSentAction: Action?

  init<R: Reducer<State, Action>>(
    initialState: State,
    reducer: R,
    runtime: EffectRuntime,
    configuration: StoreConfiguration,
    observer: (@Sendable (StoreEvent<State, Action>) -> Void)?
  ) {
    self.currentState = initialState
    self.reducer = { state, action in reducer.reduce(into: &state, action: action) }
    self.reporter = configuration.reporter
    self.dependencies =
      configuration.dependencies.isDefault ? nil : configuration.dependencies
    self.observer = observer
    self.recordsOrigins = configuration.recordsOrigins
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

  override var lastAction: Action? {
    self.lastSentAction
  }

  /// Sets where effects deliver their actions: the store that owns this core.
  override func attach(to store: Store<State, Action>) {
    self.scheduler = EffectScheduler(
      runtime: self.runtime,
      deliver: { [weak store] action, box in
        await store?.receive(action, from: box)
      }
    )
  }
  override func send(_ action: Action, location: SourceLocation) -> StoreTask {
    guard !self.shutDown else {
      self.reportSendAfterShutdown(action, location: location)
      return StoreTask(nil)
    }
    self.sendCount &+= 1
    if self.sendCount == 1 {
      // NB: only the first action is kept: any action of the right type is a valid template
      // for key-path embedding, and keeping one per send would cost a copy per action.
      self.lastSentAction = action
    }
    self.process(action, origin: .send)
    let lifetime = self.scheduler.submit()
    if self.recordsOrigins, let lifetime {
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
    return StoreTask(lifetime)
  }

  override func receive(_ action: Action, from box: EffectBox) {
    // The delivery rule: checked here, on the store's executor, when the action arrives.
    guard !box.isCancelled || !self.checksDelivery, !self.shutDown else { return }
    self.scheduler.lifetime = box.lifetime
    self.process(action, origin: .effect)
    _ = self.scheduler.submit()
  }

  /// Reduces `action`, then every action it sent synchronously, iteratively.
  private func process(_ action: Action, origin: StoreEventOrigin) {
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

  private func reduce(_ action: Action, origin: StoreEventOrigin) {
    let effect: Effect<Action>
    if let dependencies = self.dependencies {
      effect = DependencyValues.$current.withValue(dependencies) {
        self.reducer(&self.currentState, action)
      }
    } else {
      effect = self.reducer(&self.currentState, action)
    }
    if self.broadcaster.hasSubscribers {
      self.broadcaster.publish(self.currentState)
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
      self.scheduler.schedule(effect) { action, box in
        self.queue.append((action, box))
        self.queueCount += 1
      }
    }
  }

  override func shutdown() async {
    if !self.shutDown {
      self.shutDown = true
      self.broadcaster.finish()
    }
    let root = self.runtime.shutdown()
    await root?.value
  }

  override func subscribeToStates() -> StateSubscription<State>? {
    guard !self.shutDown else { return nil }
    return self.broadcaster.subscribe(current: self.currentState)
  }

  private func reportSendAfterShutdown(_ action: Action, location: SourceLocation) {
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

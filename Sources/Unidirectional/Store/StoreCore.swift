/// The implementation behind a ``Store``: a ``RootCore``, or a ``ScopedCore`` of one.
///
/// Cores are not `Sendable`: a core is only used on the executor of its root store (which every
/// scoped store shares), from the isolated methods of the store that owns it.
@usableFromInline protocol StoreCore<State, Action>: AnyObject {
  associatedtype State: Sendable
  associatedtype Action: Sendable

  /// The current state.
  var state: State { get }

  /// Whether the store was shut down (or is shutting down gracefully).
  var isShutDown: Bool { get }

  /// Reduces `action` and starts its effects (see ``Store/send(_:fileID:filePath:line:column:)``).
  func send(_ action: Action, location: SourceLocation) -> StoreTask

  /// Like `send`, but a store that is shut down rejects the action quietly: `nil`.
  func trySend(_ action: Action, location: SourceLocation) -> StoreTask?

  func shutdown() async

  func shutdown(gracePeriod: Duration, clock: (any Clock<Duration>)?) async

  /// A subscription to the states, or `nil` once the store has shut down.
  func subscribeToStates() -> StateSubscription<State>?

  /// The core of a store scoped from this one.
  func scoped<ChildState: Sendable, ChildAction: Sendable>(
    state: WritableKeyPath<State, ChildState>,
    embed: @escaping @Sendable (ChildAction) -> Action
  ) -> any StoreCore<ChildState, ChildAction>

  /// The root store's effects, once it has started one.
  var supervisor: EffectSupervisor? { get }

  /// The root core, which shuts down in phases (``StoreGroup``).
  var phasedShutdown: any PhasedShutdown { get }
}

/// A root core's graceful shutdown, one phase at a time.
///
/// A ``StoreGroup`` runs each phase for all its stores and waits for them together (one timer for
/// the group, not a task per store). Called on the store's executor.
@usableFromInline protocol PhasedShutdown: AnyObject {
  /// Rejects later sends; `false` if the store was already closed.
  func closeForShutdown() -> Bool
  /// The clock the grace period is measured on by default.
  var shutdownClock: any Clock<Duration> { get }
  /// Cancels every effect.
  func cancelForShutdown()
  /// Lets go of the effects' way back once they ended, or reports those that did not.
  func completeShutdown(effectsEnded: Bool, gracePeriod: Duration)
  /// The store's effects, once it has started one.
  var supervisor: EffectSupervisor? { get }
  /// Whether an observer hears of the shutdown (``completeShutdown(effectsEnded:gracePeriod:)``).
  var isObserved: Bool { get }
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

  /// Reports an issue at this location.
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

/// How a root store is set up beyond its state and reducer.
@usableFromInline
package struct StoreConfiguration: Sendable {
  /// The executor every effect task of the store prefers.
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
  /// Mutation-testing switch, `false` only in the test proving the timer oracle can fail:
  /// cancelling a timer neither takes it out of its clock's queue nor stops it from firing.
  package var cancelsTimers = true

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
  package let action: Action
  package let state: State
  package let origin: StoreEventOrigin

  @usableFromInline
  init(action: Action, state: State, origin: StoreEventOrigin) {
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
  /// Sent by a running effect.
  case effect
  /// Returned as `.send` and reduced in the same `send`.
  case immediate
}

extension StoreEvent: Sendable where State: Sendable, Action: Sendable {}

/// A short description of a value for diagnostics: enum cases get a leading dot.
func debugDescription(of value: Any) -> String {
  let description = String(describing: value)
  let mirror = Mirror(reflecting: value)
  if mirror.displayStyle == .enum, let first = description.first, first.isLetter {
    return "." + description
  }
  return description
}

/// Watches what a store does: the actions it reduces, its state changes, its effects, the issues it
/// reports and its shutdown.
///
/// For logs, metrics and traces.
///
/// Implement the methods you need; the others do nothing. Pass the observer when creating the root
/// store; scoped stores report through their root's observer.
///
/// ```swift
/// struct ActionLog<State: Sendable, Action: Sendable>: StoreObserver {
///   func actionReduced(_ action: Action, origin: ActionOrigin) {
///     print("reduced \(action) from \(origin)")
///   }
///   func effectEnded(_ effect: EffectReference, outcome: EffectOutcome) {
///     if case .failed(let error) = outcome { print("\(effect) failed: \(error)") }
///   }
/// }
///
/// let store = Store(initialState: Feature.State(), observer: ActionLog()) { Feature() }
/// ```
///
/// The companion package's `UnidirectionalServer` has bridges to swift-log, swift-metrics and
/// swift-distributed-tracing (`LoggingObserver`, `MetricsObserver`, `TracingObserver`, combined by
/// `ObserverGroup`). The core depends on none of them; a bridge of your own is a few lines:
///
/// ```swift
/// struct Metrics<State: Sendable, Action: Sendable>: StoreObserver {
///   let actions = Counter(label: "store.actions")
///   let failures = Counter(label: "store.effect_failures")
///   func actionReduced(_ action: Action, origin: ActionOrigin) { actions.increment() }
///   func effectEnded(_ effect: EffectReference, outcome: EffectOutcome) {
///     if case .failed = outcome { failures.increment() }
///   }
/// }
/// ```
///
/// **When it is called.** Store events (`actionReduced`, `stateChanged`, `storeShutDown`)
/// are called on the store's executor, in order, right after they happen: keep them short (hand
/// heavy work to a task or a queue). Effect events are called on the effect's task, and
/// `issueReported` where the issue was reported. No observer costs nothing: a store made without
/// one never checks for one on its hot paths beyond a single branch.
///
/// **What an event costs.** The store calls its observer through an existential, so a generic
/// observer's methods run unspecialized. There a loop over an array of existentials (`[any
/// StoreObserver<State, Action>]`) looks up generic metadata at run time on every event; to
/// combine observers, chain them (as `ObserverGroup` does: the first and a group of the rest).
public protocol StoreObserver<State, Action>: Sendable {
  /// The observed store's state.
  associatedtype State: Sendable
  /// The observed store's action.
  associatedtype Action: Sendable

  /// The store reduced `action`.
  func actionReduced(_ action: Action, origin: ActionOrigin)

  /// Reducing an action changed the state. With an `Equatable` state, called only when the state
  /// differs; otherwise after every reduce.
  func stateChanged(from oldState: State, to newState: State)

  /// What an effect's events should carry from the task that starts it: called on that task
  /// (the sender's, or the effect's or timer's that delivered the action) just before the
  /// effect's own task is created, and handed to ``effectStarted(_:)`` and the
  /// `effectEnded` methods as the reference's ``EffectReference/context``.
  ///
  /// A tracer returns the sender's span context here, so an effect's span is the child of the
  /// request that started it even though the effect runs on a task of its own. `nil` by default.
  func effectContext() -> (any Sendable)?

  /// A `.run` effect started.
  func effectStarted(_ effect: EffectReference)

  /// A `.run` effect ended: its body returned, it was cancelled, or it threw.
  func effectEnded(_ effect: EffectReference, outcome: EffectOutcome)

  /// A `.run` effect ended, after running for `duration`.
  ///
  /// The duration is measured on the store's `continuousClock` dependency (exact under a
  /// ``TestClock``). By default this calls ``effectEnded(_:outcome:)``: implement either.
  func effectEnded(_ effect: EffectReference, outcome: EffectOutcome, duration: Duration)

  /// The store, or one of its effects, reported an issue (it is still reported as usual).
  func issueReported(_ issue: ReportedIssue)

  /// The store shut down (``Store/shutdown()``, a graceful shutdown, or its release).
  func storeShutDown()
}

extension StoreObserver {
  /// Does nothing by default.
  public func actionReduced(_ action: Action, origin: ActionOrigin) {}
  /// Does nothing by default.
  public func stateChanged(from oldState: State, to newState: State) {}
  /// Captures nothing by default.
  public func effectContext() -> (any Sendable)? { nil }
  /// Does nothing by default.
  public func effectStarted(_ effect: EffectReference) {}
  /// Does nothing by default.
  public func effectEnded(_ effect: EffectReference, outcome: EffectOutcome) {}
  /// Calls ``effectEnded(_:outcome:)``.
  public func effectEnded(_ effect: EffectReference, outcome: EffectOutcome, duration: Duration) {
    self.effectEnded(effect, outcome: outcome)
  }
  /// Does nothing by default.
  public func issueReported(_ issue: ReportedIssue) {}
  /// Does nothing by default.
  public func storeShutDown() {}
}

/// Where an action a store reduced came from.
public enum ActionOrigin: Sendable, Hashable, CustomStringConvertible {
  /// Passed to ``Store/send(_:fileID:filePath:line:column:)`` (or `trySend`).
  case send
  /// Sent by a running effect.
  case effect(EffectReference)
  /// Returned as `.send` by the reducer and reduced before the sending `send` returned.
  case immediate

  /// A short description, for logs.
  public var description: String {
    switch self {
    case .send: "send"
    case .effect(let effect): "\(effect)"
    case .immediate: "immediate"
    }
  }
}

/// Identifies one running `.run` effect of a store, from its start to its end (an identity may be
/// reused after the effect has ended).
///
/// Two references are equal when they name the same effect, whatever their contexts.
public struct EffectReference: Sendable, Hashable, CustomStringConvertible {
  @usableFromInline let raw: ObjectIdentifier
  /// What the store's observer captured on the task that started the effect
  /// (``StoreObserver/effectContext()``), in effect events; `nil` elsewhere.
  public private(set) var context: (any Sendable)?

  @usableFromInline init(_ unit: any EffectUnit, context: (any Sendable)? = nil) {
    self.raw = ObjectIdentifier(unit)
    self.context = context
  }

  /// The context captured for the effect running on the current task, if its store has an
  /// observer (what an observer's ``StoreObserver/effectContext()`` can hand on to the effects
  /// this effect's actions start).
  public static var currentContext: (any Sendable)? {
    Self.startingContext
  }

  /// Bound in an observed store's effect tasks.
  @TaskLocal static var startingContext: (any Sendable)?

  /// The same effect with another context (an observer that groups others hands each its own).
  public func with(context: (any Sendable)?) -> EffectReference {
    var copy = self
    copy.context = context
    return copy
  }

  /// Whether both name the same effect.
  public static func == (lhs: Self, rhs: Self) -> Bool {
    lhs.raw == rhs.raw
  }

  /// Hashes the effect's identity.
  public func hash(into hasher: inout Hasher) {
    hasher.combine(self.raw)
  }

  /// A short description, for logs.
  public var description: String {
    "effect#\(String(UInt(bitPattern: self.raw.hashValue), radix: 16))"
  }
}

/// How a `.run` effect ended.
public enum EffectOutcome: Sendable, CustomStringConvertible {
  /// Its body returned.
  case finished
  /// It was cancelled (by id, by its ``StoreTask``, or by shutdown) and stopped.
  case cancelled
  /// Its body threw this error (other than `CancellationError`), with or without a `catch`.
  case failed(any Error)

  /// A short description, for logs.
  public var description: String {
    switch self {
    case .finished: "finished"
    case .cancelled: "cancelled"
    case .failed(let error): "failed: \(error)"
    }
  }
}

/// Compares states for `stateChanged`, when `State` is `Equatable` (found once per store).
func makeStateComparison<State>(_: State.Type) -> ((State, State) -> Bool)? {
  guard let equatable = State.self as? any Equatable.Type else { return nil }
  func compare<E: Equatable>(_: E.Type) -> (State, State) -> Bool {
    // NB: `E` is `State` itself (the cast above opened it), so each comparison reinterprets the
    // states instead of casting them: two dynamic casts per action were most of what an observer
    // cost a store whose state is `Equatable`.
    { lhs, rhs in
      withUnsafePointer(to: lhs) { lhs in
        withUnsafePointer(to: rhs) { rhs in
          UnsafeRawPointer(lhs).assumingMemoryBound(to: E.self).pointee
            == UnsafeRawPointer(rhs).assumingMemoryBound(to: E.self).pointee
        }
      }
    }
  }
  return compare(equatable)
}

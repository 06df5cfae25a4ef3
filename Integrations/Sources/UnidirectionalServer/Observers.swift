import Logging
import Metrics
import Synchronization
import Tracing
import Unidirectional

// MARK: - swift-log

/// Logs what a store does through swift-log: effect failures and reported issues as errors and
/// warnings, shutdowns as info, actions and effect ends at debug.
///
/// One line per registry: `observer: { key in LoggingObserver(logger: logger, key: key) }`; each
/// line then carries the key as `session.key` metadata.
public struct LoggingObserver<State: Sendable, Action: Sendable>: StoreObserver {
  /// The logger, with the session's key as metadata when there is one.
  public let logger: Logger

  /// Creates an observer that logs to `logger`.
  ///
  /// - Parameters:
  ///   - logger: Where to log.
  ///   - key: The session's key, added as `session.key` metadata.
  public init(logger: Logger, key: (some Sendable)? = String?.none) {
    var logger = logger
    if let key { logger[metadataKey: "session.key"] = "\(key)" }
    self.logger = logger
  }

  /// Logs the action at debug level.
  public func actionReduced(_ action: Action, origin: ActionOrigin) {
    self.logger.debug("action reduced", metadata: ["action": "\(action)", "origin": "\(origin)"])
  }

  /// Logs the effect's end: an error if it failed, debug otherwise.
  public func effectEnded(_ effect: EffectReference, outcome: EffectOutcome, duration: Duration) {
    let metadata: Logger.Metadata = [
      "effect": "\(effect)", "outcome": "\(outcome)", "duration": "\(duration)",
    ]
    if case .failed(let error) = outcome {
      var metadata = metadata
      metadata["error"] = "\(error)"
      metadata["error.type"] = "\(type(of: error))"
      self.logger.error("effect failed", metadata: metadata)
    } else {
      self.logger.debug("effect ended", metadata: metadata)
    }
  }

  /// Logs the issue as a warning.
  public func issueReported(_ issue: ReportedIssue) {
    self.logger.warning(
      "issue reported",
      metadata: [
        "issue": "\(issue.message)",
        "source": "\(issue.fileID):\(issue.line)",
      ]
    )
  }

  /// Logs the shutdown at info level.
  public func storeShutDown() {
    self.logger.info("store shut down")
  }
}

// MARK: - swift-metrics

/// Reports every store's actions and effects to swift-metrics, under the names API.md lists:
/// `unidirectional_actions_total`, `unidirectional_effect_duration_seconds{outcome}` and
/// `unidirectional_effect_failures_total`.
///
/// One instance can serve every store of a registry (the one-observer initializer): it keeps no
/// per-store count. The live sessions gauge is the registry's: see ``SessionMetrics``.
public struct MetricsObserver<State: Sendable, Action: Sendable>: StoreObserver {
  private let actions: Counter
  private let finished: Metrics.Timer
  private let cancelled: Metrics.Timer
  private let failedDurations: Metrics.Timer
  private let failures: Counter

  /// Creates the observer.
  ///
  /// - Parameters:
  ///   - prefix: The metrics' names' prefix.
  ///   - factory: Where the metrics go (the bootstrapped system's by default).
  public init(
    prefix: String = "unidirectional",
    factory: any MetricsFactory = MetricsSystem.factory
  ) {
    self.actions = Counter(label: "\(prefix)_actions_total", factory: factory)
    func duration(_ outcome: String) -> Metrics.Timer {
      Metrics.Timer(
        label: "\(prefix)_effect_duration_seconds",
        dimensions: [("outcome", outcome)],
        preferredDisplayUnit: .seconds,
        factory: factory
      )
    }
    self.finished = duration("finished")
    self.cancelled = duration("cancelled")
    self.failedDurations = duration("failed")
    self.failures = Counter(label: "\(prefix)_effect_failures_total", factory: factory)
  }

  /// Counts the action.
  public func actionReduced(_ action: Action, origin: ActionOrigin) {
    self.actions.increment()
  }

  /// Records the effect's duration by outcome, and counts a failure.
  public func effectEnded(_ effect: EffectReference, outcome: EffectOutcome, duration: Duration) {
    switch outcome {
    case .finished: self.finished.record(duration: duration)
    case .cancelled: self.cancelled.record(duration: duration)
    case .failed:
      self.failedDurations.record(duration: duration)
      self.failures.increment()
    }
  }
}

// MARK: - swift-distributed-tracing

/// Traces a store's effects through swift-distributed-tracing: a span per `.run` effect, a child of
/// the span of the request whose action started it, with the outcome and any error recorded.
///
/// One line per registry: `observer: { key in TracingObserver(tracer: tracer, key: key) }`.
public final class TracingObserver<State: Sendable, Action: Sendable>: StoreObserver {
  private let tracer: any Tracer
  private let key: String?
  /// The context of the latest action sent from outside (a request's), and the effects' spans.
  private let guarded = Mutex<(context: ServiceContext?, spans: [EffectReference: any Span])>(
    (nil, [:])
  )

  /// Creates an observer that starts spans on `tracer`.
  ///
  /// - Parameters:
  ///   - tracer: The tracer; by default the bootstrapped (or scoped) one.
  ///   - key: The session's key, set as the `session.key` attribute of every span.
  public init(
    tracer: any Tracer = InstrumentationSystem.tracer,
    key: (some Sendable)? = String?.none
  ) {
    self.tracer = tracer
    self.key = key.map { "\($0)" }
  }

  /// Remembers the context of an action sent from outside: the parent of the effects it starts.
  ///
  /// Called on the store's executor in the sender's task, so `ServiceContext.current` is the
  /// request's.
  public func actionReduced(_ action: Action, origin: ActionOrigin) {
    guard case .send = origin, let context = ServiceContext.current else { return }
    self.guarded.withLock { $0.context = context }
  }

  /// Starts the effect's span.
  public func effectStarted(_ effect: EffectReference) {
    let context = self.guarded.withLock { $0.context } ?? .topLevel
    let span = self.tracer.startAnySpan("effect", context: context, ofKind: .internal)
    span.attributes["effect.id"] = "\(effect)"
    if let key = self.key { span.attributes["session.key"] = key }
    self.guarded.withLock { $0.spans[effect] = span }
  }

  /// Ends the effect's span, with its outcome (and error).
  public func effectEnded(_ effect: EffectReference, outcome: EffectOutcome, duration: Duration) {
    guard let span = self.guarded.withLock({ $0.spans.removeValue(forKey: effect) }) else { return }
    span.attributes["effect.outcome"] = "\(outcome)"
    if case .failed(let error) = outcome {
      span.recordError(error)
      span.setStatus(SpanStatus(code: .error, message: "\(error)"))
    }
    span.end()
  }
}

// MARK: - Several at once

/// Several observers as one: logs, metrics and traces from one registry.
///
/// ```swift
/// observer: { key in
///   ObserverGroup(
///     LoggingObserver(logger: logger, key: key), MetricsObserver(), TracingObserver(key: key))
/// }
/// ```
public struct ObserverGroup<State: Sendable, Action: Sendable>: StoreObserver {
  private let observers: [any StoreObserver<State, Action>]

  /// Creates a group that tells every observer, in order.
  public init(_ observers: any StoreObserver<State, Action>...) {
    self.observers = observers
  }

  /// Tells every observer.
  public func actionReduced(_ action: Action, origin: ActionOrigin) {
    for observer in self.observers { observer.actionReduced(action, origin: origin) }
  }
  /// Tells every observer.
  public func stateChanged(from oldState: State, to newState: State) {
    for observer in self.observers { observer.stateChanged(from: oldState, to: newState) }
  }
  /// Tells every observer.
  public func effectStarted(_ effect: EffectReference) {
    for observer in self.observers { observer.effectStarted(effect) }
  }
  /// Tells every observer.
  public func effectEnded(_ effect: EffectReference, outcome: EffectOutcome, duration: Duration) {
    for observer in self.observers {
      observer.effectEnded(effect, outcome: outcome, duration: duration)
    }
  }
  /// Tells every observer.
  public func issueReported(_ issue: ReportedIssue) {
    for observer in self.observers { observer.issueReported(issue) }
  }
  /// Tells every observer.
  public func storeShutDown() {
    for observer in self.observers { observer.storeShutDown() }
  }
}

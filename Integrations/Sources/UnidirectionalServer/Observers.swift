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
///
/// A caller's metadata (a request id) reaches the lines its sends cause: bind it around the send
/// with ``withLogMetadata(_:operation:)``, and the action's line and those of the effects it starts,
/// and of the effects those start, carry it.
///
/// ```swift
/// try await withLogMetadata(["request.id": "\(context.id)"]) {
///   try await carts.send(.add(item), to: customer)
/// }
/// ```
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

  /// Logs the action at debug level, with the sender's metadata (on an effect's task, the
  /// metadata of the send that started the effect).
  public func actionReduced(_ action: Action, origin: ActionOrigin) {
    self.logger.debug(
      "action reduced",
      metadata: Self.withCallers(["action": "\(action)", "origin": "\(origin)"], self.callers)
    )
  }

  /// The metadata of the task that starts an effect, for that effect's lines.
  public func effectContext() -> (any Sendable)? {
    self.callers
  }

  /// Logs the effect's end: an error if it failed, debug otherwise.
  public func effectEnded(_ effect: EffectReference, outcome: EffectOutcome, duration: Duration) {
    // NB: built only for a line that is logged (most effects end well, below the usual level).
    func metadata() -> Logger.Metadata {
      Self.withCallers(
        ["effect": "\(effect)", "outcome": "\(outcome)", "duration": "\(duration)"],
        captured(Logger.Metadata.self, in: effect.context)
      )
    }
    if case .failed(let error) = outcome {
      var metadata = metadata()
      metadata["error"] = "\(error)"
      metadata["error.type"] = "\(type(of: error))"
      self.logger.error("effect failed", metadata: metadata)
    } else {
      self.logger.debug("effect ended", metadata: metadata())
    }
  }

  /// Logs the issue as a warning.
  public func issueReported(_ issue: ReportedIssue) {
    self.logger.warning(
      "issue reported",
      metadata: Self.withCallers(
        ["issue": "\(issue.message)", "source": "\(issue.fileID):\(issue.line)"],
        self.callers
      )
    )
  }

  /// The caller's metadata in force on this task: bound around a send, or carried by the effect
  /// running here.
  private var callers: Logger.Metadata? {
    SessionLogMetadata.current ?? captured(Logger.Metadata.self, in: EffectReference.currentContext)
  }

  /// `metadata` with the caller's added (the line's own keys win).
  private static func withCallers(
    _ metadata: Logger.Metadata,
    _ callers: Logger.Metadata?
  ) -> Logger.Metadata {
    guard let callers else { return metadata }
    return callers.merging(metadata) { _, own in own }
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
/// The parent is captured on the task that starts the effect (``effectContext()``): the request's
/// for an action it sent, the starting effect's parent for an action an effect sent back, and
/// none for an effect a timer started on a system clock. Concurrent requests to one key each
/// parent their own effects.
///
/// One line per registry: `observer: { key in TracingObserver(tracer: tracer, key: key) }`.
public final class TracingObserver<State: Sendable, Action: Sendable>: StoreObserver {
  private let tracer: any Tracer
  private let key: String?
  /// Whether the tracer is swift-distributed-tracing's no-op one (none bootstrapped): then
  /// nothing is captured or kept per effect.
  private let isNoOp: Bool
  /// The spans of running effects.
  private let spans = Mutex<[EffectReference: any Span]>([:])

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
    self.isNoOp = tracer is NoOpTracer
  }

  /// The span context in force where the effect starts: the sender's, or, on an effect's own
  /// task, the one captured when that effect started.
  public func effectContext() -> (any Sendable)? {
    guard !self.isNoOp else { return nil }
    return ServiceContext.current
      ?? captured(ServiceContext.self, in: EffectReference.currentContext)
  }

  /// Starts the effect's span, a child of the context captured where it started.
  public func effectStarted(_ effect: EffectReference) {
    guard !self.isNoOp else { return }
    let context = captured(ServiceContext.self, in: effect.context) ?? .topLevel
    let span = self.tracer.startAnySpan("effect", context: context, ofKind: .internal)
    span.attributes["effect.id"] = "\(effect)"
    if let key = self.key { span.attributes["session.key"] = key }
    self.spans.withLock { $0[effect] = span }
  }

  /// Ends the effect's span, with its outcome (and error).
  public func effectEnded(_ effect: EffectReference, outcome: EffectOutcome, duration: Duration) {
    guard !self.isNoOp, let span = self.spans.withLock({ $0.removeValue(forKey: effect) }) else {
      return
    }
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
  // NB: a pair, the first observer and a group of the rest, not an array: a store calls its
  // observer through an existential, so these methods run unspecialized, and there every pass
  // over an array of `any StoreObserver<State, Action>` looked up the array's, its iterator's and
  // its element's metadata at run time, on every event.
  private let head: any StoreObserver<State, Action>
  private let tail: (any StoreObserver<State, Action>)?

  /// Creates a group that tells every observer, in order.
  public init(_ observers: any StoreObserver<State, Action>...) {
    self.init(members: observers[...])
  }

  private init(members: ArraySlice<any StoreObserver<State, Action>>) {
    self.head = members.first ?? Silent()
    self.tail = members.count > 1 ? ObserverGroup(members: members.dropFirst()) : nil
  }

  /// Tells every observer.
  public func actionReduced(_ action: Action, origin: ActionOrigin) {
    self.head.actionReduced(action, origin: origin)
    self.tail?.actionReduced(action, origin: origin)
  }
  /// Tells every observer.
  public func stateChanged(from oldState: State, to newState: State) {
    self.head.stateChanged(from: oldState, to: newState)
    self.tail?.stateChanged(from: oldState, to: newState)
  }
  /// Every observer's context; `nil` when none captured one.
  public func effectContext() -> (any Sendable)? {
    let head = self.head.effectContext()
    let tail = self.tail?.effectContext()
    guard head != nil || tail != nil else { return nil }
    return GroupContext(head: head, tail: tail)
  }
  /// Tells every observer, each with its own context.
  public func effectStarted(_ effect: EffectReference) {
    let (head, tail) = GroupContext.split(effect.context)
    self.head.effectStarted(effect.with(context: head))
    self.tail?.effectStarted(effect.with(context: tail))
  }
  /// Tells every observer, each with its own context.
  public func effectEnded(_ effect: EffectReference, outcome: EffectOutcome, duration: Duration) {
    let (head, tail) = GroupContext.split(effect.context)
    self.head.effectEnded(effect.with(context: head), outcome: outcome, duration: duration)
    self.tail?.effectEnded(effect.with(context: tail), outcome: outcome, duration: duration)
  }
  /// Tells every observer.
  public func issueReported(_ issue: ReportedIssue) {
    self.head.issueReported(issue)
    self.tail?.issueReported(issue)
  }
  /// Tells every observer.
  public func storeShutDown() {
    self.head.storeShutDown()
    self.tail?.storeShutDown()
  }

  /// The member of an empty group.
  private struct Silent: StoreObserver {}
}

/// The contexts an ``ObserverGroup``'s first member and the group of the rest captured for one
/// effect.
struct GroupContext: Sendable {
  let head: (any Sendable)?
  let tail: (any Sendable)?

  /// The first member's and the rest's contexts in `context` (a group's), or `context` itself for
  /// both otherwise.
  static func split(_ context: (any Sendable)?) -> (head: (any Sendable)?, tail: (any Sendable)?) {
    guard let context else { return (nil, nil) }
    guard let group = context as? GroupContext else { return (context, context) }
    return (group.head, group.tail)
  }
}

/// The value of type `T` in `context`: itself, or the first one a group's members captured (a
/// span context for tracing, log metadata for logging).
func captured<T>(_ type: T.Type, in context: (any Sendable)?) -> T? {
  guard let context else { return nil }
  if let value = context as? T { return value }
  guard let group = context as? GroupContext else { return nil }
  return captured(type, in: group.head) ?? captured(type, in: group.tail)
}

/// Log metadata a caller binds around its sends (``withLogMetadata(_:operation:)``).
enum SessionLogMetadata {
  @TaskLocal static var current: Logger.Metadata?
}

/// Runs `operation` with `metadata` (a request id, say) added to every line a ``LoggingObserver``
/// logs for the sends made inside it: their actions, and the effects those start.
///
/// - Parameters:
///   - metadata: The caller's metadata; nested calls merge, the inner value winning.
///   - isolation: The caller's isolation, kept for `operation`.
///   - operation: The work that sends.
/// - Returns: What `operation` returns.
/// - Throws: What `operation` throws.
public func withLogMetadata<Result>(
  _ metadata: Logger.Metadata,
  isolation: isolated (any Actor)? = #isolation,
  operation: () async throws -> Result
) async rethrows -> Result {
  let merged = (SessionLogMetadata.current ?? [:]).merging(metadata) { _, inner in inner }
  return try await SessionLogMetadata.$current.withValue(merged, operation: operation)
}

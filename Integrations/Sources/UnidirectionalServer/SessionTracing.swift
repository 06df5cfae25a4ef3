public import Tracing
public import Unidirectional

/// How a session's key appears in spans: a key may be personal data (an email, an account).
public enum SpanKeyPolicy: Sendable, Equatable {
  /// No key in spans (the default).
  case omitted
  /// The key's 64-bit FNV-1a digest, salted, in hex: spans of one key can be found together
  /// without the key itself. A pseudonym, not anonymity: with a small set of possible keys and
  /// the salt, a digest can be matched to its key.
  case hashed(salt: String)
  /// The key as it is.
  case plain

  /// The attribute value for `key`, or `nil` to leave it out.
  func value(of key: () -> String) -> String? {
    switch self {
    case .omitted:
      return nil
    case .hashed(let salt):
      // NB: the stable 64-bit FNV-1a the idempotency window keeps its keys as.
      let hex = String(IdempotencyRecord.digest(of: salt + "\u{0}" + key()), radix: 16)
      return String(repeating: "0", count: 16 - hex.count) + hex
    case .plain:
      return key()
    }
  }
}

/// Spans for a ``StoreRegistry``'s sends, activations and saves.
///
/// - `session.send`: one per registry send, a child of the span in force on the sending task
///   (the request's, under Hummingbird's tracing middleware).
/// - `session.activate`: loading a key's state and taking its lease, a child of the send that
///   caused it.
/// - `storage.save`: one per group-commit save, with `storage.batch.states` (the sessions'
///   states written, one per key) and `storage.batch.sends` (the sends that waited on it). It runs
///   on the registry's save task, so it has no parent.
///
/// Keys go into spans (`session.key`) only as `keys:` allows; omitted by default.
///
/// ```swift
/// let carts = StoreRegistry(
///   storage: storage,
///   registryObserver: SessionObserverGroup(SessionMetrics(), SessionTracing())
/// ) { _ in Cart.State() } reducer: { Cart() }
/// ```
public struct SessionTracing: SessionRegistryObserver {
  private let tracer: any Tracer
  private let keys: SpanKeyPolicy

  /// Creates spans on `tracer`.
  ///
  /// - Parameters:
  ///   - tracer: The tracer; by default the bootstrapped one.
  ///   - keys: Whether and how spans carry the session's key.
  public init(tracer: any Tracer = InstrumentationSystem.tracer, keys: SpanKeyPolicy = .omitted) {
    self.tracer = tracer
    self.keys = keys
  }

  /// `true`: every send, activation and save is a span; `false` with swift-distributed-tracing's
  /// no-op tracer (none bootstrapped), so sends keep their fastest path.
  public var measuresIntervals: Bool { !(self.tracer is NoOpTracer) }

  /// Starts a `session.send` span under the sending task's context.
  public func sendStarted(key: @autoclosure () -> String) -> (any SessionInterval)? {
    let span = self.tracer.startAnySpan(
      "session.send",
      context: ServiceContext.current ?? .topLevel,
      ofKind: .internal
    )
    if let value = self.keys.value(of: key) { span.attributes["session.key"] = value }
    return SpanInterval(span: span)
  }

  /// Starts a `session.activate` span under the send that caused it.
  public func activationStarted(
    key: @autoclosure () -> String,
    within send: (any SessionInterval)?
  ) -> (any SessionInterval)? {
    let span = SpanInterval.in(send)?.span
    let parent = span?.context ?? ServiceContext.current ?? .topLevel
    let activation = self.tracer.startAnySpan(
      "session.activate",
      context: parent,
      ofKind: .internal
    )
    if let value = self.keys.value(of: key) { activation.attributes["session.key"] = value }
    return SpanInterval(span: activation)
  }

  /// Starts a `storage.save` span with the batch's size.
  public func saveStarted(states: Int, sends: Int) -> (any SessionInterval)? {
    let span = self.tracer.startAnySpan("storage.save", context: .topLevel, ofKind: .client)
    span.attributes["storage.batch.states"] = states
    span.attributes["storage.batch.sends"] = sends
    return SpanInterval(span: span)
  }
}

/// A span the registry ends.
struct SpanInterval: SessionInterval {
  let span: any Span

  /// The span interval in `interval`, itself or a member of a group.
  static func `in`(_ interval: (any SessionInterval)?) -> SpanInterval? {
    if let span = interval as? SpanInterval { return span }
    return (interval as? IntervalGroup)?.intervals.lazy.compactMap { $0 as? SpanInterval }.first
  }

  func end(error: (any Error)?) {
    if let error {
      self.span.recordError(error)
      self.span.setStatus(SpanStatus(code: .error))
    }
    self.span.end()
  }
}

/// Several registry observers as one: metrics and tracing, say.
public struct SessionObserverGroup: SessionRegistryObserver {
  private let observers: [any SessionRegistryObserver]

  /// Creates a group that tells every observer, in order.
  public init(_ observers: any SessionRegistryObserver...) {
    self.observers = observers
  }

  /// Whether any observer measures intervals.
  public var measuresIntervals: Bool { self.observers.contains { $0.measuresIntervals } }

  /// Tells every observer.
  public func sessionActivated(key: String) {
    for observer in self.observers { observer.sessionActivated(key: key) }
  }
  /// Tells every observer.
  public func sessionPassivated(key: String, reason: PassivationReason) {
    for observer in self.observers { observer.sessionPassivated(key: key, reason: reason) }
  }
  /// Tells every observer.
  public func liveCountChanged(to count: Int) {
    for observer in self.observers { observer.liveCountChanged(to: count) }
  }
  /// Tells every observer.
  public func sessionsSaved(count: Int, duration: Duration) {
    for observer in self.observers { observer.sessionsSaved(count: count, duration: duration) }
  }
  /// Tells every observer.
  public func storageFailed(key: String) {
    for observer in self.observers { observer.storageFailed(key: key) }
  }
  /// Tells every observer.
  public func ownershipLost(key: String) {
    for observer in self.observers { observer.ownershipLost(key: key) }
  }
  /// Tells every observer.
  public func idempotentReplay(key: String) {
    for observer in self.observers { observer.idempotentReplay(key: key) }
  }
  /// Starts every observer's interval; `nil` when none measures sends.
  public func sendStarted(key: @autoclosure () -> String) -> (any SessionInterval)? {
    IntervalGroup(self.observers.compactMap { $0.sendStarted(key: key()) })
  }
  /// Starts every observer's interval, within the group's interval of `send`.
  public func activationStarted(
    key: @autoclosure () -> String,
    within send: (any SessionInterval)?
  ) -> (any SessionInterval)? {
    IntervalGroup(self.observers.compactMap { $0.activationStarted(key: key(), within: send) })
  }
  /// Starts every observer's interval.
  public func saveStarted(states: Int, sends: Int) -> (any SessionInterval)? {
    IntervalGroup(self.observers.compactMap { $0.saveStarted(states: states, sends: sends) })
  }
}

/// Intervals of several observers, ended together.
struct IntervalGroup: SessionInterval {
  let intervals: [any SessionInterval]

  init?(_ intervals: [any SessionInterval]) {
    guard !intervals.isEmpty else { return nil }
    self.intervals = intervals
  }

  func end(error: (any Error)?) {
    for interval in self.intervals { interval.end(error: error) }
  }
}

import InMemoryLogging
import InMemoryTracing
import Logging
import MetricsTestKit
import Synchronization
import Testing
import Tracing
import Unidirectional
import UnidirectionalServer

/// A feature with an effect that fails, one that finishes, and one that waits.
struct Job: Reducer {
  struct State: Sendable, Equatable { var done = 0 }
  enum Action: Sendable { case succeed, fail, finished }
  struct Broken: Error {}

  func reduce(into state: inout State, action: Action) -> Effect<Action> {
    switch action {
    case .succeed: return .run { send in await send(.finished) }
    case .fail:
      return .run { _ in
        throw Broken()
      } catch: { _, _ in
      }
    case .finished:
      state.done += 1
      return .none
    }
  }
}

@Suite(.timeLimit(.minutes(1))) struct ObserverTests {
  @Test func aSendersLogMetadataReachesTheLinesOfItsActionsAndEffects() async throws {
    let handler = InMemoryLogHandler()
    var logger = Logger(label: "test", factory: { _ in handler })
    logger.logLevel = .debug
    let tracer = InMemoryTracer()
    let store = Store(
      initialState: Job.State(),
      observer: ObserverGroup(
        TracingObserver<Job.State, Job.Action>(tracer: tracer),
        LoggingObserver<Job.State, Job.Action>(logger: logger)
      )
    ) {
      Job()
    }
    // NB: sent from a task that runs no test, as in production (in a test, effects inherit the
    // sender's task-locals anyway).
    await Task.detached {
      await withLogMetadata(["request.id": "r-1"]) { await store.send(.succeed).finish() }
      await withLogMetadata(["request.id": "r-2"]) { await store.send(.fail).finish() }
      await store.send(.succeed).finish()
      await store.shutdown()
    }.value
    let lines = handler.entries.map { ($0.message.description, $0.metadata) }
    let reduced = lines.filter { $0.0 == "action reduced" }.map {
      ($0.1["action"]?.description ?? "", $0.1["request.id"]?.description)
    }
    #expect(reduced.map(\.0) == ["succeed", "finished", "fail", "succeed", "finished"])
    #expect(reduced.map(\.1) == ["r-1", "r-1", "r-2", nil, nil])
    let ends = lines.filter { $0.0 == "effect ended" || $0.0 == "effect failed" }
    #expect(ends.map { $0.1["request.id"]?.description } == ["r-1", "r-2", nil])
  }

  @Test func theLoggingObserverLogsFailuresWithTheSessionKey() async throws {
    let handler = InMemoryLogHandler()
    let logger = Logger(label: "test", factory: { _ in handler })
    let registry = StoreRegistry(
      observer: { key in LoggingObserver<Job.State, Job.Action>(logger: logger, key: key) }
    ) { (_: String) in
      Job.State()
    } reducer: {
      Job()
    }
    try await registry.send(.fail, to: "alice")
    await registry.shutdown(gracePeriod: .seconds(1))
    let errors = handler.entries.filter { $0.level == .error }
    #expect(errors.count == 1)
    #expect(errors.first?.metadata["session.key"] == "alice")
    #expect(errors.first?.metadata["error.type"]?.description.contains("Broken") == true)
    #expect(handler.entries.contains { $0.message.description == "store shut down" })
  }

  @Test func anUnreadableStateIsLoggedWithTheKeyAndTheIssueAsMetadata() async throws {
    let handler = InMemoryLogHandler()
    let logger = Logger(label: "test", factory: { _ in handler })
    let storage = InMemorySessionStorage<String, Job.State>()
    storage.store(Job.State(), for: "alice")
    storage.makeUnreadable("alice")
    let registry = StoreRegistry(
      storage: storage,
      owner: "a",
      observer: { key in LoggingObserver<Job.State, Job.Action>(logger: logger, key: key) }
    ) { (_: String) in
      Job.State()
    } reducer: {
      Job()
    }
    await #expect(throws: SessionError.self) { try await registry.send(.succeed, to: "alice") }
    let warning = try #require(handler.entries.first { $0.level == .warning })
    #expect(warning.metadata["session.key"] == "alice")
    #expect(warning.metadata["issue"]?.description.contains("unreadable") == true)
    #expect(warning.metadata["source"] != nil)
    await registry.shutdown(gracePeriod: .seconds(1))
  }

  @Test func theMetricsObserverCountsActionsAndTimesEffectsUnderTheAPIsNames() async throws {
    let metrics = TestMetrics()
    // One observer for every store: it keeps no per-store count, so sharing it is safe.
    let registry = StoreRegistry(observer: MetricsObserver<Job.State, Job.Action>(factory: metrics))
    {
      (_: String) in
      Job.State()
    } reducer: {
      Job()
    }
    try await registry.send(.succeed, to: "a").finish()
    try await registry.send(.fail, to: "b").finish()
    let actions = try metrics.expectCounter("unidirectional_actions_total")
    #expect(actions.totalValue == 3)
    let failures = try metrics.expectCounter("unidirectional_effect_failures_total")
    #expect(failures.totalValue == 1)
    let finished = try metrics.expectTimer(
      "unidirectional_effect_duration_seconds",
      [("outcome", "finished")]
    )
    #expect(finished.values.count == 1)
    await registry.shutdown(gracePeriod: .seconds(1))
  }

  @Test func theLiveGaugeIsTheRegistrysLiveCountThroughEveryWayASessionEnds() async throws {
    let metrics = TestMetrics()
    let time = TestClock()
    let storage = InMemorySessionStorage<String, Job.State>(clock: time)
    let registry = StoreRegistry(
      storage: storage,
      owner: "a",
      idleTimeout: .seconds(60),
      capacity: 3,
      clock: time,
      observer: MetricsObserver<Job.State, Job.Action>(factory: metrics),
      registryObserver: SessionMetrics(factory: metrics)
    ) { (_: String) in
      Job.State()
    } reducer: {
      Job()
    }
    let live = try metrics.expectGauge("unidirectional_sessions_live")
    func expectLive(_ count: Int, _ comment: Comment) {
      #expect(live.lastValue == Double(count), comment)
      #expect(registry.liveCount == count, comment)
      #expect(live.values.allSatisfy { $0 >= 0 }, comment)
    }
    func passivations(_ reason: String) throws -> Int64 {
      try metrics.expectCounter("unidirectional_session_passivations_total", [("reason", reason)])
        .totalValue
    }
    for key in ["a", "b", "c"] { try await registry.send(.succeed, to: key).finish() }
    expectLive(3, "three activated")
    try await registry.send(.succeed, to: "d").finish()
    expectLive(3, "the fourth pushed the least recently used out")
    try await registry.passivate("b")
    expectLive(2, "one passivated explicitly")
    try await registry.erase("c")
    expectLive(1, "one erased")
    await time.advance(by: .seconds(61))
    expectLive(0, "the last one passivated when idle, on the clock's advance")
    try await registry.send(.succeed, to: "e").finish()
    expectLive(1, "a new one activated")
    await registry.shutdown(gracePeriod: .seconds(1))
    expectLive(0, "shut down")
    #expect(try passivations("capacity") == 1)
    #expect(try passivations("explicit") == 1)
    #expect(try passivations("erased") == 1)
    #expect(try passivations("idle") == 1)
    #expect(try passivations("shutdown") == 1)
    #expect(try passivations("discarded") == 0)
    let activations = try metrics.expectCounter("unidirectional_session_activations_total")
    #expect(activations.totalValue == 5)
    let batch = try metrics.expectRecorder("unidirectional_storage_batch_size")
    #expect(!batch.values.isEmpty)
    #expect(
      try metrics.expectTimer("unidirectional_storage_save_seconds").values.count
        == batch.values.count
    )
  }

  @Test func theTracingObserverStartsASpanPerEffectUnderTheRequestsSpan() async throws {
    let tracer = InMemoryTracer()
    let registry = StoreRegistry(
      observer: { key in TracingObserver<Job.State, Job.Action>(tracer: tracer, key: key) }
    ) { (_: String) in
      Job.State()
    } reducer: {
      Job()
    }
    let request = tracer.startSpan("request")
    try await ServiceContext.withValue(request.context) {
      try await registry.send(.fail, to: "alice").finish()
    }
    request.end()
    await registry.shutdown(gracePeriod: .seconds(1))
    let effect = try #require(tracer.finishedSpans.first { $0.operationName == "effect" })
    let parent = try #require(tracer.finishedSpans.first { $0.operationName == "request" })
    #expect(effect.spanContext.traceID == parent.spanContext.traceID)
    #expect(effect.spanContext.parentSpanID == parent.spanContext.spanID)
    #expect(effect.attributes["session.key"]?.toSpanAttribute() == "alice")
    #expect(effect.errors.count == 1)
  }

  /// Every member of a group hears every event, in order, and gets back the context it captured,
  /// whichever members captured one; a group of none hears nothing and captures nothing.
  @Test func eachMemberOfAGroupHearsEveryEventWithTheContextItCaptured() async {
    let log = LockedEvents()
    let group = ObserverGroup<Job.State, Job.Action>(
      Member(name: "a", captures: "a's", log: log),
      Member(name: "b", captures: nil, log: log),
      Member(name: "c", captures: "c's", log: log)
    )
    let store = Store(initialState: Job.State(), observer: group) { Job() }
    // NB: from a task that runs no test, as in production.
    await Task.detached {
      await store.send(.succeed).finish()
      await store.shutdown()
    }.value
    #expect(
      log.events == [
        "a reduced", "b reduced", "c reduced",
        "a started a's", "b started none", "c started c's",
        "a reduced", "b reduced", "c reduced",
        "a changed", "b changed", "c changed",
        "a ended a's", "b ended none", "c ended c's",
        "a shut down", "b shut down", "c shut down",
      ]
    )
    #expect(ObserverGroup<Job.State, Job.Action>().effectContext() == nil)
    #expect(
      ObserverGroup<Job.State, Job.Action>(Member(name: "b", captures: nil, log: log))
        .effectContext() == nil
    )
  }
}

/// Events heard by a group's members, in order.
final class LockedEvents: Sendable {
  private let lock = Mutex<[String]>([])
  var events: [String] { self.lock.withLock { $0 } }
  func append(_ event: String) { self.lock.withLock { $0.append(event) } }
}

/// A group's member that captures a fixed context and logs what it hears.
struct Member: StoreObserver {
  typealias State = Job.State
  typealias Action = Job.Action
  let name: String
  let captures: String?
  let log: LockedEvents

  func actionReduced(_ action: Job.Action, origin: ActionOrigin) {
    self.log.append("\(name) reduced")
  }
  func stateChanged(from oldState: Job.State, to newState: Job.State) {
    self.log.append("\(name) changed")
  }
  func effectContext() -> (any Sendable)? { self.captures }
  func effectStarted(_ effect: EffectReference) {
    self.log.append("\(name) started \(effect.context as? String ?? "none")")
  }
  func effectEnded(_ effect: EffectReference, outcome: EffectOutcome, duration: Duration) {
    self.log.append("\(name) ended \(effect.context as? String ?? "none")")
  }
  func storeShutDown() { self.log.append("\(name) shut down") }
}

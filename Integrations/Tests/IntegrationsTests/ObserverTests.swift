import InMemoryLogging
import InMemoryTracing
import Logging
import MetricsTestKit
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

  @Test func theMetricsObserverCountsActionsTimesEffectsAndGaugesLiveSessions() async throws {
    let metrics = TestMetrics()
    let registry = StoreRegistry(
      observer: { _ in MetricsObserver<Job.State, Job.Action>(factory: metrics) }
    ) { (_: String) in
      Job.State()
    } reducer: {
      Job()
    }
    try await registry.send(.succeed, to: "a").finish()
    try await registry.send(.fail, to: "b").finish()
    let live = try metrics.expectMeter("unidirectional.sessions.live")
    #expect(live.lastValue == 2)
    let actions = try metrics.expectCounter("unidirectional.actions")
    #expect(actions.totalValue == 3)
    let failures = try metrics.expectCounter("unidirectional.effect.failures")
    #expect(failures.totalValue == 1)
    let finished = try metrics.expectTimer(
      "unidirectional.effect.duration",
      [("outcome", "finished")]
    )
    #expect(finished.values.count == 1)
    await registry.shutdown(gracePeriod: .seconds(1))
    #expect(live.lastValue == 0)
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
}

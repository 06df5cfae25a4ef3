import InMemoryTracing
import Testing
import Tracing
import Unidirectional
import UnidirectionalServer

/// `session.send`, `session.activate` and `storage.save` spans, their parents and what they carry.
@Suite struct SessionTracingTests {
  private func registry(
    _ tracer: InMemoryTracer,
    keys: SpanKeyPolicy = .omitted,
    storage: InMemorySessionStorage<String, Job.State> = InMemorySessionStorage()
  ) -> StoreRegistry<String, Job> {
    StoreRegistry(
      storage: storage,
      registryObserver: SessionObserverGroup(
        SessionMetrics(),
        SessionTracing(tracer: tracer, keys: keys)
      )
    ) { (_: String) in
      Job.State()
    } reducer: {
      Job()
    }
  }

  @Test func aSendIsASpanUnderTheRequestAndItsActivationUnderTheSend() async throws {
    let tracer = InMemoryTracer()
    let registry = self.registry(tracer)
    let request = tracer.startSpan("request")
    try await ServiceContext.withValue(request.context) {
      try await registry.send(.succeed, to: "alice")
      try await registry.send(.succeed, to: "alice")
    }
    request.end()
    await registry.shutdown(gracePeriod: .seconds(1))
    let spans = tracer.finishedSpans
    let parent = try #require(spans.first { $0.operationName == "request" })
    let sends = spans.filter { $0.operationName == "session.send" }
    #expect(sends.count == 2)
    for send in sends {
      #expect(send.spanContext.traceID == parent.spanContext.traceID)
      #expect(send.spanContext.parentSpanID == parent.spanContext.spanID)
      #expect(send.errors.isEmpty)
    }
    let activations = spans.filter { $0.operationName == "session.activate" }
    #expect(activations.count == 1)
    let first = try #require(activations.first)
    #expect(sends.contains { $0.spanContext.spanID == first.spanContext.parentSpanID })
    #expect(first.attributes["session.key"] == nil)
  }

  @Test func aSaveIsASpanCarryingTheBatchsStatesAndSends() async throws {
    let tracer = InMemoryTracer()
    let registry = self.registry(tracer)
    try await withThrowingTaskGroup(of: Void.self) { group in
      for key in ["a", "b", "c"] {
        group.addTask { try await registry.send(.succeed, to: key) }
      }
      try await group.waitForAll()
    }
    await registry.shutdown(gracePeriod: .seconds(1))
    let saves = tracer.finishedSpans.filter { $0.operationName == "storage.save" }
    #expect(!saves.isEmpty)
    var states = 0
    for save in saves {
      guard case .int64(let count)? = save.attributes["storage.batch.states"]?.toSpanAttribute()
      else {
        Issue.record("a save span without its batch's states: \(save.attributes)")
        continue
      }
      states += Int(count)
      #expect(save.attributes["storage.batch.sends"] != nil)
    }
    // Each send's state, and the final save at shutdown, were written by some save.
    #expect(states >= 3)
  }

  @Test func withTheNoOpTracerSendsAreNotMeasuredAndKeepTheirFastPath() {
    #expect(!SessionTracing(tracer: NoOpTracer()).measuresIntervals)
    #expect(SessionTracing(tracer: InMemoryTracer()).measuresIntervals)
    #expect(
      SessionObserverGroup(SessionMetrics(), SessionTracing(tracer: InMemoryTracer()))
        .measuresIntervals
    )
    #expect(
      !SessionObserverGroup(SessionMetrics(), SessionTracing(tracer: NoOpTracer()))
        .measuresIntervals
    )
  }

  @Test func aFailedSendsSpanRecordsItsError() async throws {
    let tracer = InMemoryTracer()
    let storage = InMemorySessionStorage<String, Job.State>()
    let registry = self.registry(tracer, storage: storage)
    await registry.shutdown(gracePeriod: .zero)
    await #expect(throws: SessionError.self) { try await registry.send(.succeed, to: "alice") }
    let send = try #require(tracer.finishedSpans.first { $0.operationName == "session.send" })
    #expect(send.errors.count == 1)
    #expect(send.status?.code == .error)
  }

  @Test func keysAreOmittedByDefaultAndOtherwiseHashedOrPlainAsAsked() async throws {
    for (policy, expected) in [
      (SpanKeyPolicy.plain, "alice"), (.hashed(salt: "pepper"), nil), (.omitted, nil),
    ] {
      let tracer = InMemoryTracer()
      let registry = self.registry(tracer, keys: policy)
      try await registry.send(.succeed, to: "alice")
      await registry.shutdown(gracePeriod: .seconds(1))
      let send = try #require(tracer.finishedSpans.first { $0.operationName == "session.send" })
      let value = send.attributes["session.key"]?.toSpanAttribute()
      switch policy {
      case .plain:
        #expect(value == expected.map { .string($0) })
      case .hashed:
        guard case .string(let digest)? = value else {
          Issue.record("no hashed key: \(String(describing: value))")
          continue
        }
        #expect(digest.count == 16)
        #expect(!digest.contains("alice"))
        let again = InMemoryTracer()
        let other = self.registry(again, keys: .hashed(salt: "pepper"))
        try await other.send(.succeed, to: "alice")
        try await other.send(.succeed, to: "bob")
        await other.shutdown(gracePeriod: .seconds(1))
        let digests = again.finishedSpans.filter { $0.operationName == "session.send" }
          .compactMap { $0.attributes["session.key"]?.toSpanAttribute() }
        #expect(digests.filter { $0 == .string(digest) }.count == 1)
        #expect(Set(digests.map { "\($0)" }).count == 2)
      case .omitted:
        #expect(value == nil)
      }
    }
  }
}

import InMemoryTracing
import Testing
import Tracing
import Unidirectional
import UnidirectionalServer

/// A feature whose effects start in the ways a span's parent can go wrong: from a timer, from
/// another effect, and while another request to the same key is in flight.
private struct Traced: Reducer {
  struct State: Sendable, Equatable { var count = 0 }
  enum Action: Sendable { case arm, fire, chain, chained, waitThenChain, quick, done }

  let clock: TestClock
  let gate: AsyncStream<Void>

  func reduce(into state: inout State, action: Action) -> Effect<Action> {
    switch action {
    case .arm: return .send(.fire, after: .seconds(1), clock: self.clock)
    case .fire, .chained, .quick: return .run { send in await send(.done) }
    case .chain: return .run { send in await send(.chained) }
    case .waitThenChain:
      return .run { [gate] send in
        for await _ in gate { break }
        await send(.chained)
      }
    case .done:
      state.count += 1
      return .none
    }
  }
}

@Suite(.timeLimit(.minutes(1))) struct EffectSpanParentTests {
  private let tracer = InMemoryTracer()
  private let clock = TestClock()
  private let gate: AsyncStream<Void>
  private let opener: AsyncStream<Void>.Continuation

  init() {
    (self.gate, self.opener) = AsyncStream<Void>.makeStream()
  }

  /// The id of the finished span named `name`.
  private func spanID(_ name: String) throws -> String {
    let span = try #require(self.tracer.finishedSpans.first { $0.operationName == name })
    return span.spanContext.spanID
  }

  private func makeStore() -> Store<Traced.State, Traced.Action> {
    Store(
      initialState: Traced.State(),
      observer: ObserverGroup(
        MetricsObserver<Traced.State, Traced.Action>(),
        TracingObserver<Traced.State, Traced.Action>(tracer: self.tracer)
      )
    ) {
      Traced(clock: self.clock, gate: self.gate)
    }
  }

  private func effectSpans() -> [FinishedInMemorySpan] {
    self.tracer.finishedSpans.filter { $0.operationName == "effect" }
  }

  @Test func anEffectAnActionSentStartsIsTheRequestsChild() async throws {
    let store = self.makeStore()
    let request = self.tracer.startSpan("request")
    await ServiceContext.withValue(request.context) { await store.send(.quick).finish() }
    request.end()
    await store.shutdown()
    let effect = try #require(self.effectSpans().first)
    #expect(effect.spanContext.parentSpanID == (try self.spanID("request")))
  }

  @Test func anEffectAnotherEffectStartedIsTheOriginalRequestsChild() async throws {
    let store = self.makeStore()
    let request = self.tracer.startSpan("request")
    await ServiceContext.withValue(request.context) { await store.send(.chain).finish() }
    request.end()
    await store.shutdown()
    let effects = self.effectSpans()
    #expect(effects.count == 2)
    for effect in effects {
      #expect(effect.spanContext.parentSpanID == (try self.spanID("request")))
    }
  }

  @Test func anEffectATimerStartedHangsUnderNoOldRequest() async throws {
    let store = self.makeStore()
    let request = self.tracer.startSpan("request")
    let armed = await ServiceContext.withValue(request.context) { await store.send(.arm) }
    request.end()
    // The timer fires outside any request: its effect has no parent, not the ended request.
    await self.clock.advance(by: .seconds(1))
    await armed.finish()
    await store.shutdown()
    #expect(await store.state.count == 1)
    let effects = self.effectSpans()
    #expect(effects.count == 1)
    #expect(effects.first?.spanContext.parentSpanID == nil)
  }

  @Test func twoConcurrentRequestsToOneStoreEachParentTheirOwnEffects() async throws {
    let store = self.makeStore()
    let first = self.tracer.startSpan("first request")
    let second = self.tracer.startSpan("second request")
    let waiting = await ServiceContext.withValue(first.context) {
      await store.send(.waitThenChain)
    }
    await ServiceContext.withValue(second.context) { await store.send(.quick).finish() }
    self.opener.yield()
    await waiting.finish()
    first.end()
    second.end()
    await store.shutdown()
    let spans = self.effectSpans()
    let firstID = try self.spanID("first request")
    let secondID = try self.spanID("second request")
    #expect(spans.count == 3)
    #expect(spans.filter { $0.spanContext.parentSpanID == firstID }.count == 2)
    #expect(spans.filter { $0.spanContext.parentSpanID == secondID }.count == 1)
  }
}

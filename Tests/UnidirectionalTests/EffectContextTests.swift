import Testing
import Unidirectional

/// A value a sender binds around its send, as a request binds its trace context.
private enum RequestID {
  @TaskLocal static var current: String?
}

/// Captures the request on the task that starts each effect, and records what each effect's
/// events carried.
private final class ContextRecorder: StoreObserver {
  typealias State = Int
  typealias Action = Step

  let started = LockIsolated<[String]>([])
  let ended = LockIsolated<[String]>([])
  let references = LockIsolated<[EffectReference]>([])

  func effectContext() -> (any Sendable)? {
    RequestID.current ?? EffectReference.currentContext
  }

  func effectStarted(_ effect: EffectReference) {
    self.started.withValue { $0.append(effect.context as? String ?? "none") }
    self.references.withValue { $0.append(effect) }
  }

  func effectEnded(_ effect: EffectReference, outcome: EffectOutcome) {
    self.ended.withValue { $0.append(effect.context as? String ?? "none") }
  }
}

private enum Step: Sendable, Equatable { case start, chained, done }

private struct Chain: Reducer {
  func reduce(into state: inout Int, action: Step) -> Effect<Step> {
    switch action {
    case .start: return .run { send in await send(.chained) }
    case .chained: return .run { send in await send(.done) }
    case .done:
      state += 1
      return .none
    }
  }
}

@Suite struct EffectContextTests {
  @Test func anEffectCarriesWhatTheObserverCapturedOnTheTaskThatStartedIt() async {
    let recorder = ContextRecorder()
    let store = Store(initialState: 0, observer: recorder) { Chain() }
    // NB: from a task that runs no test, as in production, where an effect's task inherits none
    // of its sender's task-locals (in a test it would, so that issues reach the test).
    await Task.detached {
      await RequestID.$current.withValue("request 1") { await store.send(.start).finish() }
      await RequestID.$current.withValue("request 2") { await store.send(.chained).finish() }
      await store.shutdown()
    }.value
    // The chained effect of request 1 started on its parent effect's task, which carries
    // request 1's context, not the sender's task-locals.
    #expect(recorder.started.value == ["request 1", "request 1", "request 2"])
    #expect(recorder.ended.value.sorted() == ["request 1", "request 1", "request 2"])
  }

  @Test func referencesToOneEffectAreEqualWhateverTheirContexts() async throws {
    let recorder = ContextRecorder()
    let store = Store(initialState: 0, observer: recorder) { Chain() }
    await RequestID.$current.withValue("request") { await store.send(.chained).finish() }
    await store.shutdown()
    let effect = try #require(recorder.references.value.first)
    let other = effect.with(context: "another")
    #expect(other == effect)
    #expect(other.hashValue == effect.hashValue)
    #expect(other.context as? String == "another")
    #expect(effect.context as? String == "request")
    // Outside an observed store's effect, no context is bound.
    #expect(EffectReference.currentContext == nil)
  }
}

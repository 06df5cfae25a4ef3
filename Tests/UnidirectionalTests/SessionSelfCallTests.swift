import Foundation
import Testing
import Unidirectional

/// A session whose own effects call its registry about its own key (Orleans' `DeactivateOnIdle`,
/// an account closed by its own action).
private struct Closer: Reducer {
  struct State: Codable, Equatable, Sendable { var key: String; var count = 0 }
  enum Action: Equatable, Sendable { case add, close, leave, selfSend, done }
  let registry: LockIsolated<StoreRegistry<String, Closer>?>

  func reduce(into state: inout State, action: Action) -> Effect<Action> {
    switch action {
    case .add:
      state.count += 1
      return .none
    case .close:
      return .run { [key = state.key, registry] send in
        try await registry.value?.erase(key)
        await send(.done)
      }
    case .leave:
      return .run { [key = state.key, registry] send in
        try await registry.value?.passivate(key)
        await send(.done)
      }
    case .selfSend:
      return .run { [key = state.key, registry] send in
        try await registry.value?.send(.add, to: key)
      }
    case .done:
      return .none
    }
  }
}

/// A session's effect may erase, passivate or send to its own key: none waits on itself.
@Suite(.timeLimit(.minutes(1))) struct SessionSelfCallTests {
  /// Runs `body` with a registry whose stores' effects reach it, then shuts it down.
  fileprivate func withRegistry(
    _ storage: InMemorySessionStorage<String, Closer.State>,
    _ body: (StoreRegistry<String, Closer>) async throws -> Void
  ) async throws {
    let box = LockIsolated<StoreRegistry<String, Closer>?>(nil)
    let registry = StoreRegistry(storage: storage) { key in
      Closer.State(key: key)
    } reducer: {
      Closer(registry: box)
    }
    box.setValue(registry)
    // NB: the registry holds its reducer, which holds the box: emptied, the cycle goes with it.
    defer { box.setValue(nil) }
    try await body(registry)
    await registry.shutdown(gracePeriod: .seconds(1))
  }

  @Test func aSessionsEffectErasesItsOwnKeyAndALaterSendStartsAfresh() async throws {
    let storage = InMemorySessionStorage<String, Closer.State>()
    try await withRegistry(storage) { registry in
      try await registry.send(.add, to: "a")
      let task = try await registry.send(.close, to: "a")
      await task.finish()
      #expect(storage.storedState(for: "a") == nil)
      #expect(registry.liveCount == 0)
      let count = try await registry.send(.add, to: "a", reading: { $0.count })
      #expect(count == 1)
    }
  }

  @Test func aSessionsEffectPassivatesItsOwnKeyWhichIsSavedAndNotLive() async throws {
    let storage = InMemorySessionStorage<String, Closer.State>()
    try await withRegistry(storage) { registry in
      try await registry.send(.add, to: "a")
      let task = try await registry.send(.leave, to: "a")
      await task.finish()
      #expect(storage.storedState(for: "a")?.count == 1)
      #expect(registry.liveCount == 0)
    }
  }

  @Test func aSessionsEffectSendsToItsOwnKeyThroughTheRegistry() async throws {
    try await withRegistry(InMemorySessionStorage()) { registry in
      let task = try await registry.send(.selfSend, to: "a")
      await task.finish()
      let count = try await registry.send(.done, to: "a", reading: { $0.count })
      #expect(count == 1)
    }
  }
}

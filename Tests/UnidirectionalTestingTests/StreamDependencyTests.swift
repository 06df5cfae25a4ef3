import Testing
import Unidirectional
import UnidirectionalTesting

/// The seeds' stream dependency: a client whose events arrive as an `AsyncThrowingStream`.
private struct EventsClient: Sendable {
  var events: @Sendable () -> AsyncThrowingStream<Int, any Error>
}

private enum EventsClientKey: DependencyKey {
  static let liveValue = EventsClient { AsyncThrowingStream { $0.finish() } }
  static let testValue = EventsClient {
    reportIssue("Unimplemented: 'EventsClient.events' was called.")
    return AsyncThrowingStream { $0.finish() }
  }
}

extension DependencyValues {
  fileprivate var events: EventsClient {
    get { self[EventsClientKey.self] }
    set { self[EventsClientKey.self] = newValue }
  }
}

private struct Feed: Reducer {
  struct State: Equatable, Sendable {
    var events: [Int] = []
    var failure: String?
  }

  enum Action: Equatable, Sendable {
    case task
    case event(Int)
    case failed(String)
  }

  @Dependency(\.events) var client

  func reduce(into state: inout State, action: Action) -> Effect<Action> {
    switch action {
    case .task:
      return .run { [client] send in
        for try await event in client.events() {
          await send(.event(event))
        }
      } catch: { error, send in
        await send(.failed("\(error)"))
      }
    case .event(let event):
      state.events.append(event)
      return .none
    case .failed(let failure):
      state.failure = failure
      return .none
    }
  }
}

@Suite(.timeLimit(.minutes(2))) struct StreamDependencyTests {
  struct Disconnected: Error, CustomStringConvertible {
    var description: String { "disconnected" }
  }

  @Test func theTestDrivesTheStreamThroughItsContinuationWithNoWaiting() async {
    let (stream, continuation) = AsyncThrowingStream.makeStream(of: Int.self)
    let store = TestStore(initialState: Feed.State()) {
      Feed()
    } withDependencies: {
      $0.events = EventsClient { stream }
    }
    let task = await store.send(.task)
    continuation.yield(1)
    await store.receive(.event(1)) { $0.events = [1] }
    continuation.yield(2)
    continuation.yield(3)
    await store.receive(.event(2)) { $0.events = [1, 2] }
    await store.receive(.event(3)) { $0.events = [1, 2, 3] }
    continuation.finish(throwing: Disconnected())
    await store.receive(.failed("disconnected")) { $0.failure = "disconnected" }
    await task.finish()
    #expect(store.outsideWorkWaits == 0)
  }

  @Test func anUnimplementedClientFailsTheTest() async {
    let issues = await collectingIssues {
      let store = TestStore(initialState: Feed.State()) { Feed() }
      await store.send(.task)
    }
    #expect(issues.map(\.message) == ["Unimplemented: 'EventsClient.events' was called."])
  }
}

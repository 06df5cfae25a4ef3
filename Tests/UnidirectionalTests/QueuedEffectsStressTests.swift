import Testing
import Unidirectional

/// `Effect.queued(id:)` under real concurrency: pipelined commands whose effects take different
/// numbers of hops reply in command order.
@Suite(.timeLimit(.minutes(2))) struct QueuedEffectsStressTests {
  private enum Action: Sendable, Equatable {
    case command(Int)
    case reply(Int)
  }

  private actor Hopper {
    func hop() {}
  }

  private struct State: Sendable {
    var replies: [Int] = []
  }

  @Test func pipelinedQueuedRepliesArriveInCommandOrder() async {
    let count = max(200, Int(4_000 * stressScale))
    let hopper = Hopper()
    let store = Store(initialState: State()) {
      Reduce<State, Action> { state, action in
        switch action {
        case .command(let number):
          return .run { send in
            // Later commands often finish their work first: 3, 2, 1, 0 hops.
            for _ in 0..<(3 - number % 4) { await hopper.hop() }
            await send(.reply(number))
          }
          .queued(id: "replies")
        case .reply(let number):
          state.replies.append(number)
          return .none
        }
      }
    }
    var tasks: [StoreTask] = []
    for number in 0..<count {
      tasks.append(await store.send(.command(number)))
    }
    for task in tasks { await task.finish() }
    let replies = await store.state.replies
    let outOfOrder = zip(replies, replies.dropFirst()).filter { $0 > $1 }.count
    #expect(replies.sorted() == Array(0..<count))
    #expect(outOfOrder == 0)
    #expect(store.liveEffectCount == 0)
  }

  @Test func queuesWithDifferentIdsDoNotWaitForEachOther() async {
    let (gate, opener) = AsyncStream.makeStream(of: Void.self)
    let store = Store(initialState: State()) {
      Reduce<State, Action> { state, action in
        switch action {
        case .command(0):
          // Blocks queue "a" until the gate opens.
          return .run { send in
            for await _ in gate { break }
            await send(.reply(0))
          }
          .queued(id: "a")
        case .command(let number):
          return .run { send in await send(.reply(number)) }.queued(id: "b")
        case .reply(let number):
          state.replies.append(number)
          return .none
        }
      }
    }
    let blocked = await store.send(.command(0))
    await store.send(.command(1)).finish()
    #expect(await store.state.replies == [1])
    opener.yield()
    await blocked.finish()
    #expect(await store.state.replies == [1, 0])
  }
}

import Testing
import Unidirectional

@Suite(.timeLimit(.minutes(1)))
struct StoreStatesTests {
  private static func makeStore() -> Store<Int, Int> {
    Store(initialState: 0) {
      Reduce<Int, Int> { state, action in
        state += action
        return .none
      }
    }
  }

  @Test func statesStartWithTheCurrentStateThenEachChange() async {
    let store = Self.makeStore()
    await store.send(10)
    var states = store.states.makeAsyncIterator()
    #expect(await states.next() == 10)
    await store.send(1)
    #expect(await states.next() == 11)
    await store.send(2)
    #expect(await states.next() == 13)
  }

  @Test func aScopedStoresStatesAreItsPartOfTheRootsStates() async {
    struct Pair: Sendable { var left = 0, right = 0 }
    let store = Store(initialState: Pair()) {
      Reduce<Pair, Int> { state, action in
        if action > 0 { state.left += action } else { state.right -= action }
        return .none
      }
    }
    let left = store.scope(state: \.left, action: { (amount: Int) in amount })
    var states = left.states.makeAsyncIterator()
    #expect(await states.next() == 0)
    await left.send(2)
    #expect(await states.next() == 2)
    await store.send(3)
    #expect(await states.next() == 5)
  }

  @Test func aSlowReaderGetsTheLatestStateNotABacklog() async {
    let store = Self.makeStore()
    var states = store.states.makeAsyncIterator()
    #expect(await states.next() == 0)
    for _ in 0..<1_000 {
      await store.send(1)
    }
    #expect(await states.next() == 1_000)
  }

  @Test func statesEndWhenTheStoreShutsDown() async {
    let store = Self.makeStore()
    var states = store.states.makeAsyncIterator()
    #expect(await states.next() == 0)
    await store.shutdown()
    #expect(await states.next() == nil)
  }

  @Test func aWaitingReaderIsResumedByTheNextChange() async {
    let store = Self.makeStore()
    let reader = Task {
      var seen: [Int] = []
      for await state in store.states {
        seen.append(state)
        if state >= 3 { break }
      }
      return seen
    }
    // The reader sees 0 first or a later state, then every state it has not skipped.
    for _ in 0..<3 { await store.send(1) }
    let seen = await reader.value
    #expect(seen.last == 3)
    #expect(seen == seen.sorted())
  }

  @Test func cancellingAReaderEndsItsIteration() async {
    let store = Self.makeStore()
    let reader = Task {
      var count = 0
      for await _ in store.states { count += 1 }
      return count
    }
    reader.cancel()
    #expect(await reader.value <= 1)
  }
}

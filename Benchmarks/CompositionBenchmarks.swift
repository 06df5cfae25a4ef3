import Unidirectional
import UnidirectionalTesting

func compositionBenchmarks() -> [Benchmark] {
  let leaf = Store(initialState: Leaf.State()) { Leaf() }
  let level1 = Store(initialState: Level1.State()) { Level1() }
  let level5 = Store(initialState: Level5.State()) { Level5() }
  let level10 = Store(initialState: Level10.State()) { Level10() }
  // NB: each side's loop sends directly. The scoped side used to call a closure per send (an async
  // call, its frame allocated in the task), which the floor did not: ~30 ns that did not depend on
  // the depth.
  func scopeBenchmark(depth: Int, _ sends: @escaping @Sendable () async -> Void) -> Benchmark {
    Benchmark(
      name: "send through \(depth) level\(depth == 1 ? "" : "s") of Scope",
      floorName: "unscoped store.send (target is per level)",
      operations: 100_000,
      target: 1.5 * Double(depth),
      run: sends,
      floor: {
        for _ in 0..<100_000 { await leaf.send(.increment) }
      }
    )
  }
  var benchmarks = [
    scopeBenchmark(depth: 1) {
      for _ in 0..<100_000 { await level1.send(.child(.increment)) }
    },
    scopeBenchmark(depth: 5) {
      for _ in 0..<100_000 {
        await level5.send(.child(.child(.child(.child(.child(.increment))))))
      }
    },
    scopeBenchmark(depth: 10) {
      for _ in 0..<100_000 {
        await level10.send(
          .child(.child(.child(.child(.child(.child(.child(.child(.child(.child(.increment))))))))))
        )
      }
    },
  ]
  let host = Store(initialState: Host.State()) { Host() }
  let scoped = host.scope(state: \.child, action: Host.Action.child)
  benchmarks.append(
    Benchmark(
      name: "send through a scoped store",
      floorName: "the parent's send of the same embedded action",
      operations: 100_000,
      target: 1.5,
      run: {
        for _ in 0..<100_000 { await scoped.send(.increment) }
      },
      floor: {
        for _ in 0..<100_000 { await host.send(.child(.increment)) }
      }
    )
  )
  let presenting = Store(initialState: Presenter.State()) { Presenter(presents: true) }
  let plain = Store(initialState: Presenter.State()) { Presenter(presents: false) }
  benchmarks.append(
    Benchmark(
      name: "parent action past an .ifLet child",
      floorName: "the same parent without .ifLet",
      operations: 100_000,
      // NB: no target: each action reads the child state twice through its key path (the
      // standard library's generic projection, most of what is left) to see whether the parent
      // dismissed or replaced it. Unspecialized, with two cancellation ids made per
      // action and the body's builder types unspecialized too, it read 29x.
      target: nil,
      run: {
        for _ in 0..<100_000 { await presenting.send(.parent) }
      },
      floor: {
        for _ in 0..<100_000 { await plain.send(.parent) }
      }
    )
  )
  let list = Store(initialState: RowList.State()) { RowList(usesForEach: true) }
  let flatList = Store(initialState: RowList.State()) { RowList(usesForEach: false) }
  benchmarks.append(
    Benchmark(
      name: "row action through .forEach (100 rows)",
      floorName: "the list's reducer updating the row itself",
      operations: 100_000,
      // NB: no target: the row's effects are scoped (a cancellation scope around the row's
      // reducer, its effect made cancellable by row) and the list is read through its key path
      // three times. Unspecialized (the reducer and the closures its builder made), it read 12x.
      target: nil,
      run: {
        for index in 0..<100_000 { await list.send(.rows(id: index % 100, action: .increment)) }
      },
      floor: {
        for index in 0..<100_000 {
          await flatList.send(.rows(id: index % 100, action: .increment))
        }
      }
    )
  )
  return benchmarks
}

func testStoreBenchmarks() -> [Benchmark] {
  [
    Benchmark(
      name: "TestStore send + receive of a .send effect",
      floorName: "(per step)",
      // NB: 1,000 rounds of two steps each (a send and a receive); the target is per step.
      operations: 2_000,
      target: nil,
      run: {
        let store = TestStore(initialState: 0) {
          Reduce<Int, Bool> { state, isResponse in
            state += 1
            return isResponse ? .none : .send(true)
          }
        }
        var expected = 0
        for _ in 0..<1_000 {
          expected += 1
          await store.send(false) { [expected] in $0 = expected }
          expected += 1
          await store.receive(where: { $0 }) { [expected] in $0 = expected }
        }
      },
      floor: nil,
      absoluteTarget: 20_000
    ),
    Benchmark(
      name: "TestStore send + advance + receive of a .run",
      floorName: "(per step)",
      // NB: 1,000 rounds of two steps each (a send and a receive), the clock's advance between
      // them counted in; the target is per step.
      operations: 2_000,
      target: nil,
      run: {
        let clock = TestClock()
        let store = TestStore(initialState: 0) {
          Reduce<Int, Bool> { state, isResponse in
            state += 1
            return isResponse
              ? .none
              : .run { send in
                try await clock.sleep(for: .seconds(1))
                await send(true)
              }
          }
        }
        var expected = 0
        for _ in 0..<1_000 {
          expected += 1
          await store.send(false) { [expected] in $0 = expected }
          await clock.advance(by: .seconds(1))
          expected += 1
          await store.receive(where: { $0 }) { [expected] in $0 = expected }
        }
      },
      floor: nil,
      absoluteTarget: 20_000
    ),
  ]
}

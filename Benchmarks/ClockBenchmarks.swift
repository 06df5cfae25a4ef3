import Unidirectional
import UnidirectionalTesting

func clockBenchmarks() -> [Benchmark] {
  [
    Benchmark(
      name: "TestClock sleep + advance tick (manual executor)",
      floorName: "(swift-clocks ~2 ms)",
      operations: 10_000,
      target: nil,
      run: { await testClockTicks(10_000) },
      floor: nil,
      absoluteTarget: 10_000
    ),
    Benchmark(
      name: "TestClock: 10,000 sleepers woken by one advance",
      floorName: "unsafe continuation resume of a parked task",
      operations: 10_000,
      target: nil,
      run: { await wakeSleepers(10_000, onClock: true) },
      floor: { await wakeSleepers(10_000, onClock: false) }
    ),
    Benchmark(
      name: "ImmediateClock.sleep",
      floorName: "try Task.checkCancellation()",
      operations: 100_000,
      target: nil,
      run: {
        let clock = ImmediateClock()
        for _ in 0..<100_000 { try? await clock.sleep(for: .milliseconds(1)) }
      },
      floor: {
        for _ in 0..<100_000 { try? Task.checkCancellation() }
      }
    ),
    Benchmark(
      name: "ContinuousClock timer tick, interval 0",
      floorName: "ContinuousClock.sleep(for: .zero) loop",
      operations: 10_000,
      target: nil,
      run: {
        var ticks = 0
        for await _ in ContinuousClock().timer(interval: .zero) {
          ticks += 1
          if ticks == 10_000 { break }
        }
      },
      floor: {
        let clock = ContinuousClock()
        for _ in 0..<10_000 { try? await clock.sleep(for: .zero) }
      }
    ),
  ]
}

/// One task sleeps a second at a time on a test clock; each advance wakes it and drains the
/// manual executor until it sleeps again.
private func testClockTicks(_ count: Int) async {
  let executor = ManualExecutor()
  let clock = TestClock()
  let task = Task(executorPreference: executor) {
    await TestExecution.$drainer.withValue(executor) {
      for _ in 0..<count { try? await clock.sleep(for: .seconds(1)) }
    }
  }
  executor.drainUntilIdle()
  for _ in 0..<count { await clock.advance(by: .seconds(1)) }
  executor.drainUntilIdle()
  await task.value
}

/// Parks `count` children (on the clock, or on bare continuations), then wakes them all.
private func wakeSleepers(_ count: Int, onClock: Bool) async {
  let executor = ManualExecutor()
  let clock = TestClock()
  let parked = LockIsolated<[UnsafeContinuation<Void, Never>]>([])
  let task = Task(executorPreference: executor) {
    await TestExecution.$drainer.withValue(executor) {
      await withDiscardingTaskGroup { group in
        for _ in 0..<count {
          group.addTask {
            if onClock {
              try? await clock.sleep(for: .seconds(1))
            } else {
              await withUnsafeContinuation { continuation in
                parked.withValue { $0.append(continuation) }
              }
            }
          }
        }
      }
    }
  }
  executor.drainUntilIdle()
  if onClock {
    await clock.advance(by: .seconds(1))
  } else {
    for continuation in parked.value { continuation.resume() }
  }
  executor.drainUntilIdle()
  await task.value
}

import Testing
import Unidirectional
import UnidirectionalTesting

/// swift-clocks' own `TestClock` scenarios, on plain tasks the test starts: deterministic inside
/// `withTestExecution`, with no yields.
@Suite(.timeLimit(.minutes(2))) struct TestExecutionTests {
  @Test func advance() async {
    await withTestExecution {
      let clock = TestClock()
      let isFinished = ActorIsolated(false)
      Task {
        try await clock.sleep(until: clock.now.advanced(by: .seconds(1)))
        await isFinished.setValue(true)
      }
      #expect(await isFinished.value == false)
      await clock.advance(by: .milliseconds(500))
      #expect(await isFinished.value == false)
      await clock.advance(by: .milliseconds(500))
      #expect(await isFinished.value == true)
    }
  }

  @Test func advanceWithReentrantUnitsOfWork() async throws {
    try await withTestExecution {
      let clock = TestClock()
      let task = Task {
        var count = 0
        for _ in 0..<5 {
          try await clock.sleep(until: clock.now.advanced(by: .seconds(1)))
          count += 1
        }
        return count
      }
      await clock.advance(by: .seconds(5))
      let count = try await task.value
      #expect(count == 5)
    }
  }

  @Test func run() async {
    await withTestExecution {
      let clock = TestClock()
      let isFinished = ActorIsolated(false)
      Task {
        try await clock.sleep(until: clock.now.advanced(by: .seconds(1)))
        await isFinished.setValue(true)
      }
      #expect(await isFinished.value == false)
      await clock.run()
      #expect(await isFinished.value == true)
    }
  }

  @Test func runMultipleUnitsOfWork() async {
    await withTestExecution {
      let clock = TestClock()
      let task = Task {
        var ticks = 0
        for await _ in clock.timer(interval: .seconds(1)).prefix(10) { ticks += 1 }
        return ticks
      }
      await clock.run()
      #expect(await task.value == 10)
    }
  }

  @Test func checkScheduledWork() async throws {
    try await withTestExecution {
      let clock = TestClock()
      Task { try await clock.sleep(for: .seconds(1)) }
      await #expect(throws: SuspensionError.self) { try await clock.checkSuspension() }
      await clock.advance(by: .seconds(1))
      try await clock.checkSuspension()
    }
  }

  @Test func cooperativeCancellation() async {
    await withTestExecution {
      let clock = TestClock()
      let didFinish = ActorIsolated(false)
      let task = Task {
        try await clock.sleep(for: .seconds(1))
        await didFinish.setValue(true)
      }
      task.cancel()
      await clock.run()
      #expect(await didFinish.value == false)
    }
  }

  @Test func cancellationRemovesTheScheduledSleep() async throws {
    try await withTestExecution {
      let clock = TestClock()
      let task = Task { try await clock.sleep(for: .seconds(1)) }
      try? await clock.checkSuspension()  // the task has reached its sleep
      #expect(clock.sleeperCount == 1)
      task.cancel()
      try await clock.checkSuspension()
    }
  }

  @Test func now() async throws {
    try await withTestExecution {
      let clock = TestClock()
      let task = Task { try await clock.sleep(for: .seconds(5)) }
      let start = clock.now
      await clock.advance(by: .seconds(5))
      #expect(clock.now == start.advanced(by: .seconds(5)))
      try await task.value
    }
  }

  @Test func sleepingUntilExactlyNowWaitsForTheNextAdvance() async {
    await withTestExecution {
      let clock = TestClock()
      let woke = ActorIsolated(false)
      Task {
        try await clock.sleep(until: clock.now)
        await woke.setValue(true)
      }
      try? await clock.checkSuspension()
      #expect(await woke.value == false)
      await clock.advance()
      #expect(await woke.value == true)
    }
  }

  @Test func sortedWakeUpsAcrossAGroup() async throws {
    try await withTestExecution {
      let clock = TestClock()
      let task = Task {
        try await withThrowingTaskGroup(of: Int.self, returning: [Int].self) { group in
          group.addTask {
            try await clock.sleep(for: .seconds(2))
            return 2
          }
          group.addTask {
            try await clock.sleep(for: .seconds(1))
            return 1
          }
          return try await group.reduce(into: []) { $0.append($1) }
        }
      }
      await clock.run()
      let order = try await task.value
      #expect(order == [1, 2])
    }
  }

  @Test func oneOutcomeOver200Runs() async {
    var outcomes: Set<[String]> = []
    for _ in 0..<200 {
      let trace = await withTestExecution {
        let clock = TestClock()
        let trace = LockIsolated<[String]>([])
        for name in ["a", "b", "c"] {
          Task {
            for tick in 1...3 {
              try await clock.sleep(for: .seconds(1))
              trace.withValue { $0.append("\(name)\(tick)") }
            }
          }
        }
        await clock.advance(by: .seconds(3))
        return trace.value
      }
      outcomes.insert(trace)
    }
    #expect(outcomes == [["a1", "b1", "c1", "a2", "b2", "c2", "a3", "b3", "c3"]])
  }

  @Test func aTaskLeftRunningDoesNotStrandTheScope() async {
    let (ended, endedContinuation) = AsyncStream.makeStream(of: Void.self)
    let clock = TestClock()
    await withTestExecution {
      Task {
        try? await clock.sleep(for: .seconds(1))
        endedContinuation.yield()
      }
      try? await clock.checkSuspension()
    }
    // The task outlived the scope; the clock still wakes it, on the global executor.
    await clock.advance(by: .seconds(1))
    var iterator = ended.makeAsyncIterator()
    await iterator.next()
  }
}

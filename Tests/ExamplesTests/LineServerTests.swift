import ExampleFeatures
import LineServerCore
import Testing
import Unidirectional
import UnidirectionalTesting

/// The line server's connection feature under the test store (no sleeps, no sockets), and a
/// small load against the real server on loopback.
@Suite(.timeLimit(.minutes(2))) struct LineServerTests {
  /// Collects the replies and closes a connection would write.
  final class Wire: Sendable {
    let lines = LockIsolated<[String]>([])
    let closed = LockIsolated(false)

    func take() -> [String] {
      self.lines.withValue { lines in
        defer { lines = [] }
        return lines
      }
    }
  }

  func makeStore(
    clock: TestClock,
    wire: Wire
  ) -> TestStore<Connection.State, Connection.Action> {
    TestStore(initialState: Connection.State()) {
      Connection(
        idleTimeout: .seconds(30),
        clock: clock,
        reply: { line in wire.lines.withValue { $0.append(line) } },
        close: { wire.closed.setValue(true) }
      )
    }
  }

  @Test func countingCommandsReplyWithTheCount() async {
    let clock = TestClock()
    let wire = Wire()
    let store = self.makeStore(clock: clock, wire: wire)
    await store.send(.received("inc")) { $0.count = 1 }
    await store.send(.received("inc")) { $0.count = 2 }
    await store.send(.received("dec")) { $0.count = 1 }
    await store.send(.received("get"))
    #expect(wire.take() == ["1", "2", "1", "1"])
    await store.send(.disconnected) { $0.isClosed = true }
  }

  @Test func aSlowReplyKeepsItsPlaceBeforeFasterOnes() async {
    let clock = TestClock()
    let wire = Wire()
    let store = self.makeStore(clock: clock, wire: wire)
    store.scheduling = .newestFirst
    await store.send(.received("sleep 100"))
    await store.send(.received("inc")) { $0.count = 1 }
    await store.send(.received("get"))
    #expect(wire.take().isEmpty)
    await clock.advance(by: .milliseconds(100))
    #expect(wire.take() == ["slept 100", "1", "1"])
    await store.send(.disconnected) { $0.isClosed = true }
  }

  @Test func malformedLinesGetOneErrorAndTheConnectionStaysUp() async {
    let clock = TestClock()
    let wire = Wire()
    let store = self.makeStore(clock: clock, wire: wire)
    await store.send(.received("jump"))
    await store.send(.received(""))
    await store.send(.received("sleep soon"))
    await store.send(.lineTooLong)
    await store.send(.received("inc")) { $0.count = 1 }
    #expect(
      wire.take() == [
        "error: unknown command 'jump'",
        "error: empty line",
        "error: sleep takes milliseconds from 0 to 60000",
        "error: line longer than 65536 bytes",
        "1",
      ]
    )
    await store.send(.disconnected) { $0.isClosed = true }
  }

  @Test func theTimerTicksUntilStopped() async {
    let clock = TestClock()
    let wire = Wire()
    let store = self.makeStore(clock: clock, wire: wire)
    await store.send(.received("start-timer")) { $0.isTimerRunning = true }
    await clock.advance(by: .seconds(2))
    await store.receive(.timerTick) { $0.ticks = 1 }
    await store.receive(.timerTick) { $0.ticks = 2 }
    await store.send(.received("stop-timer")) { $0.isTimerRunning = false }
    await clock.advance(by: .seconds(5))
    #expect(wire.take() == ["timer started", "timer stopped"])
    await store.send(.disconnected) { $0.isClosed = true }
  }

  @Test func anIdleConnectionIsClosedAfterItsTimeoutRestartedByEachCommand() async {
    let clock = TestClock()
    let wire = Wire()
    let store = self.makeStore(clock: clock, wire: wire)
    await store.send(.received("inc")) { $0.count = 1 }
    await clock.advance(by: .seconds(20))
    await store.send(.received("get"))
    await clock.advance(by: .seconds(20))
    #expect(!wire.closed.value)
    await clock.advance(by: .seconds(10))
    await store.receive(.idleTimedOut) { $0.isClosed = true }
    #expect(wire.take() == ["1", "1", "error: idle for 30.0 seconds, closing"])
    #expect(wire.closed.value)
    await store.send(.received("inc"))
  }

  @Test func disconnectingCancelsEverythingTheClientStarted() async {
    let clock = TestClock()
    let wire = Wire()
    let store = self.makeStore(clock: clock, wire: wire)
    await store.send(.received("start-timer")) { $0.isTimerRunning = true }
    await store.send(.received("sleep 500"))
    await store.send(.disconnected) {
      $0.isClosed = true
      $0.isTimerRunning = false
    }
    await clock.advance(by: .seconds(60))
    #expect(wire.take() == ["timer started"])
    // `finish` (at release) would fail if any effect were still running.
    await store.finish()
  }

  @Test func quitRepliesAndClosesAfterTheRepliesBeforeIt() async {
    let clock = TestClock()
    let wire = Wire()
    let store = self.makeStore(clock: clock, wire: wire)
    await store.send(.received("sleep 10"))
    await store.send(.received("quit")) { $0.isClosed = true }
    #expect(!wire.closed.value)
    await clock.advance(by: .milliseconds(10))
    #expect(wire.take() == ["slept 10", "bye"])
    #expect(wire.closed.value)
  }

  @Test func aSmallLoadLosesNothingAndKeepsEveryClientsOrder() async throws {
    let report = try await runLoad(
      LoadOptions(
        clients: 20,
        commands: 50,
        resettingClients: 3,
        garbageClients: 3,
        timeLimit: .seconds(60)
      )
    )
    #expect(report.expectedReplies == 1_000)
    #expect(report.replies == 1_000)
    #expect(report.lost == 0)
    #expect(report.outOfOrder == 0)
    #expect(report.garbageClientsAnsweredCorrectly == 3)
    #expect(report.summary.hasPrefix("load: 1000 replies, 0 lost, 0 out of order, "))
  }
}

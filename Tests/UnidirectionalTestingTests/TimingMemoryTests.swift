import Testing
import Unidirectional
import UnidirectionalTesting

/// Debounce re-arms one timer per id (a restarted idle timeout holds no memory per restart);
/// throttle state is dropped once its interval has passed.
@Suite(.timeLimit(.minutes(1))) struct TimingMemoryTests {
  struct Idle: Reducer {
    struct State: Equatable, Sendable {
      var timedOut = 0
      var lastCommand = 0
    }
    enum Action: Equatable, Sendable {
      case command(Int)
      case cancelTimeout
      case cancelThenCommand(Int)
      case timedOut(Int)
      case throttled(Int)
      case ran(Int)
    }
    enum CancelID { case idle }

    let clock: any Clock<Duration>

    func reduce(into state: inout State, action: Action) -> Effect<Action> {
      switch action {
      case .command(let number):
        state.lastCommand = number
        return .send(.timedOut(number)).debounce(
          id: CancelID.idle,
          for: .seconds(10),
          clock: self.clock
        )
      case .cancelTimeout:
        return .cancel(id: CancelID.idle)
      case .cancelThenCommand(let number):
        state.lastCommand = number
        return .merge(
          .cancel(id: CancelID.idle),
          .send(.timedOut(number)).debounce(id: CancelID.idle, for: .seconds(10), clock: self.clock)
        )
      case .timedOut:
        state.timedOut += 1
        return .none
      case .throttled(let number):
        return .send(.ran(number)).throttle(
          id: number,
          for: .seconds(1),
          clock: self.clock,
          latest: false
        )
      case .ran:
        return .none
      }
    }
  }

  /// Counts the sleeps started on a test clock.
  struct SleepCountingClock: Clock {
    let base: TestClock
    let sleeps = LockIsolated(0)
    var now: TestClock.Instant { self.base.now }
    var minimumResolution: Duration { .zero }
    func sleep(until deadline: TestClock.Instant, tolerance: Duration?) async throws {
      self.sleeps.withValue { $0 += 1 }
      try await self.base.sleep(until: deadline, tolerance: tolerance)
    }
  }

  @Test func restartingADebounceReArmsItsOneTimer() async {
    let clock = TestClock()
    let counting = SleepCountingClock(base: clock)
    let store = TestStore(initialState: Idle.State()) { Idle(clock: counting) }
    store.exhaustivity = .off
    for number in 1...100 {
      await store.send(.command(number))
      await clock.advance(by: .seconds(1))
      // One sleeping timer, whatever the number of restarts.
      #expect(clock.sleeperCount == 1)
    }
    await clock.advance(by: .seconds(9))
    await store.receive(.timedOut(100))
    #expect(store.state.timedOut == 1)
    #expect(clock.sleeperCount == 0)
    // 100 restarts, one timer: it slept once per deadline it reached (about every 10 s), not once per
    // restart.
    #expect(counting.sleeps.value <= 12)
    #expect(store.store.timingStateCounts.debounces == 0)
  }

  @Test func theReArmedTimerFiresAtTheLatestDeadline() async {
    let clock = TestClock()
    let store = TestStore(initialState: Idle.State()) { Idle(clock: clock) }
    await store.send(.command(1)) { $0.lastCommand = 1 }
    await clock.advance(by: .seconds(6))
    await store.send(.command(2)) { $0.lastCommand = 2 }
    // The first deadline passes: the timer wakes, sees the new deadline and sleeps again.
    await clock.advance(by: .seconds(9))
    await clock.advance(by: .seconds(1))
    await store.receive(.timedOut(2)) { $0.timedOut = 1 }
  }

  @Test func aCancelledTimeoutDoesNotFireAndANewOneStartsAfresh() async {
    let clock = TestClock()
    let store = TestStore(initialState: Idle.State()) { Idle(clock: clock) }
    await store.send(.command(1)) { $0.lastCommand = 1 }
    await store.send(.cancelTimeout)
    await clock.advance(by: .seconds(20))
    await store.send(.command(2)) { $0.lastCommand = 2 }
    await clock.advance(by: .seconds(10))
    await store.receive(.timedOut(2)) { $0.timedOut = 1 }
  }

  @Test func cancellingThenDebouncingInOneActionKeepsTheNewTimeout() async {
    let clock = TestClock()
    let store = TestStore(initialState: Idle.State()) { Idle(clock: clock) }
    await store.send(.command(1)) { $0.lastCommand = 1 }
    await store.send(.cancelThenCommand(2)) { $0.lastCommand = 2 }
    await clock.advance(by: .seconds(10))
    await store.receive(.timedOut(2)) { $0.timedOut = 1 }
  }

  @Test func aTimerCancelledWithItsStoreTaskIsNotReArmed() async {
    let clock = TestClock()
    let store = TestStore(initialState: Idle.State()) { Idle(clock: clock) }
    let first = await store.send(.command(1)) { $0.lastCommand = 1 }
    await first.cancel()
    await store.send(.command(2)) { $0.lastCommand = 2 }
    await clock.advance(by: .seconds(10))
    await store.receive(.timedOut(2)) { $0.timedOut = 1 }
  }

  @Test func throttleStateOfPastIntervalsIsDropped() async {
    let clock = TestClock()
    let store = TestStore(initialState: Idle.State()) { Idle(clock: clock) }
    store.exhaustivity = .off
    // Ten intervals, each throttling 200 ids never used again.
    for round in 0..<10 {
      for number in (round * 200)..<((round + 1) * 200) {
        await store.send(.throttled(number))
      }
      await clock.advance(by: .seconds(1))
    }
    // Kept forever, that would be 2,000 entries; expired ones are swept once the count doubles.
    #expect(store.store.timingStateCounts.throttles <= 2 * 200 + 64)
    await store.skipReceivedActions()
  }
}

import Foundation
import Testing
import Unidirectional
import UnidirectionalTesting

/// A feature that reads dependencies in its initial state, its reducer, its effects and (in
/// the tests) its state assertions.
private struct Stamps: Reducer {
  struct State: Equatable, Sendable {
    var id: UUID
    var stamps: [Date] = []
  }

  enum Action: Equatable, Sendable {
    case stamp
    case stampLater
    case stamped(Date)
  }

  @Dependency(\.date) var date

  var body: some ReducerOf<Self> {
    Reduce { state, action in
      switch action {
      case .stamp:
        state.stamps.append(self.date.now)
        return .none
      case .stampLater:
        return .run { send in
          @Dependency(\.date) var date
          await send(.stamped(date.now))
        }
      case .stamped(let date):
        state.stamps.append(date)
        return .none
      }
    }
  }
}

@Suite(.timeLimit(.minutes(2))) struct TestStoreParityTests {
  @Test func stateIsTheStateAsOfTheLastAssertion() async {
    let clock = TestClock()
    let store = TestStore(initialState: Counter.State()) { Counter(clock: clock) }
    await store.send(.decrementTapped) { $0.count = -1 }
    await clock.advance(by: .seconds(1))
    // `.decrementDelayResponse` was reduced, but not asserted yet.
    #expect(store.state.count == -1)
    await store.receive(.decrementDelayResponse) { $0.count = 0 }
    #expect(store.state.count == 0)
  }

  @Test func finishFailsOnReceivedActionsThatWereNotAsserted() async {
    let clock = TestClock()
    let issues = await collectingIssues {
      let store = TestStore(initialState: Counter.State()) { Counter(clock: clock) }
      await store.send(.decrementTapped) { $0.count = -1 }
      await clock.advance(by: .seconds(1))
      await store.finish()
    }
    #expect(
      issues.map(\.message) == [
        """
        The store received 1 unexpected action:

          .decrementDelayResponse

        Assert each with 'receive', or call 'skipReceivedActions()'.
        """
      ]
    )
  }

  @Test func actionsPendingAfterAMustHandleFailureCanStillBeReceived() async {
    let clock = TestClock()
    let issues = await collectingIssues {
      let store = TestStore(initialState: Counter.State()) { Counter(clock: clock) }
      await store.send(.decrementTapped) { $0.count = -1 }
      await clock.advance(by: .seconds(1))
      await store.send(.incrementTapped) { $0.count = 1 }
      // Asserted against the state as of the last assertion (the send), as in the Composable
      // Architecture: the pending action had brought the count to 0.
      await store.receive(.decrementDelayResponse) { $0.count = 0 }
    }
    #expect(
      issues.map(\.message.firstLine) == [
        "Must handle 1 received action before sending an action:"
      ]
    )
  }

  @Test func receivingTheWrongActionIsOneFailureNotTwo() async {
    let clock = TestClock()
    let issues = await collectingIssues {
      let store = TestStore(initialState: Counter.State()) { Counter(clock: clock) }
      await store.send(.decrementTapped) { $0.count = -1 }
      await clock.advance(by: .seconds(1))
      // Both the action and the state are wrong: only the action is reported.
      await store.receive(.timerTick) { $0.count = 99 }
      #expect(store.state.count == 0)
    }
    #expect(issues.map(\.message.firstLine) == ["Received unexpected action:"])
  }

  @Test func receiveWhereMatchesAPredicateAndReportsAMismatch() async {
    let clock = TestClock()
    let store = TestStore(initialState: Counter.State()) { Counter(clock: clock) }
    await store.send(.decrementTapped) { $0.count = -1 }
    await clock.advance(by: .seconds(1))
    await store.receive(where: { $0 == .decrementDelayResponse }) { $0.count = 0 }

    let issues = await collectingIssues {
      let store = TestStore(initialState: Counter.State()) { Counter(clock: clock) }
      await store.send(.decrementTapped) { $0.count = -1 }
      await clock.advance(by: .seconds(1))
      await store.receive(where: { $0 == .timerTick })
    }
    #expect(
      issues.map(\.message) == [
        """
        Received unexpected action:

          .decrementDelayResponse

        It does not match the predicate.
        """
      ]
    )
  }

  @Test func dependenciesApplyToTheInitialStateTheReducerAndStateAssertions() async {
    @Dependency(\.uuid) var uuid
    @Dependency(\.date) var date
    let store = TestStore(initialState: Stamps.State(id: uuid())) {
      Stamps()
    } withDependencies: {
      $0.uuid = .incrementing
      $0.date = .constant(Date(timeIntervalSince1970: 1))
    }
    #expect(store.state.id == UUID(uuidString: "00000000-0000-0000-0000-000000000000"))
    await store.send(.stamp) { $0.stamps = [date.now] }
    #expect(store.state.stamps == [Date(timeIntervalSince1970: 1)])
  }

  @Test func dependenciesCanChangeBetweenSteps() async {
    let store = TestStore(initialState: Stamps.State(id: UUID())) {
      Stamps()
    } withDependencies: {
      $0.date = .constant(Date(timeIntervalSince1970: 1))
    }
    await store.send(.stamp) { $0.stamps = [Date(timeIntervalSince1970: 1)] }
    store.dependencies.date = .constant(Date(timeIntervalSince1970: 2))
    await store.send(.stamp) { $0.stamps.append(Date(timeIntervalSince1970: 2)) }
    await store.send(.stampLater)
    await store.receive(.stamped(Date(timeIntervalSince1970: 2))) {
      $0.stamps.append(Date(timeIntervalSince1970: 2))
    }
    await store.withDependencies {
      $0.date = .constant(Date(timeIntervalSince1970: 3))
    } operation: {
      await store.send(.stamp) { $0.stamps.append(Date(timeIntervalSince1970: 3)) }
    }
    await store.send(.stamp) { $0.stamps.append(Date(timeIntervalSince1970: 2)) }
  }

  @Test func stateAssertionsAndReadsSeeTheDependenciesAsLastChanged() async {
    @Dependency(\.date) var date
    let store = TestStore(initialState: Stamps.State(id: UUID())) {
      Stamps()
    } withDependencies: {
      $0.date = .constant(Date(timeIntervalSince1970: 1))
    }
    #expect(store.dependencies.date.now == Date(timeIntervalSince1970: 1))
    #expect(store.dependencies.context == .test)
    store.dependencies.date = .constant(Date(timeIntervalSince1970: 2))
    #expect(store.dependencies.date.now == Date(timeIntervalSince1970: 2))
    await store.send(.stamp) { $0.stamps = [date.now] }
    #expect(store.state.stamps == [Date(timeIntervalSince1970: 2)])
    await store.withDependencies {
      $0.date = .constant(Date(timeIntervalSince1970: 3))
    } operation: {
      #expect(store.dependencies.date.now == Date(timeIntervalSince1970: 3))
      await store.send(.stamp) { $0.stamps.append(date.now) }
    }
    #expect(store.dependencies.date.now == Date(timeIntervalSince1970: 2))
    #expect(store.state.stamps == [Date(timeIntervalSince1970: 2), Date(timeIntervalSince1970: 3)])
  }

  @Test func withExhaustivityAppliesOnlyInside() async {
    let clock = TestClock()
    let issues = await collectingIssues {
      let store = TestStore(initialState: Counter.State()) { Counter(clock: clock) }
      await store.withExhaustivity(.off) {
        await store.send(.decrementTapped)  // the change is not asserted: fine here
        await clock.advance(by: .seconds(1))
        await store.send(.incrementTapped) { $0.count = 1 }  // the received action is skipped
      }
      #expect(store.exhaustivity == .on)
      await store.send(.incrementTapped)  // not fine here
    }
    #expect(
      issues.map(\.message.firstLine) == [
        "State was not expected to change, but a change occurred:"
      ]
    )
  }

  @Test func assertChecksTheCurrentState() async {
    let clock = TestClock()
    let store = TestStore(initialState: Counter.State()) { Counter(clock: clock) }
    store.exhaustivity = .off
    await store.send(.startTimerTapped)
    await clock.advance(by: .seconds(3))
    await store.skipReceivedActions()
    store.assert {
      $0.count = 3
      $0.isTimerRunning = true
    }
    let issues = await collectingIssues {
      store.assert { $0.count = 4 }
    }
    #expect(
      issues.map(\.message) == [
        """
        A state change does not match expectation:

            Counter.State(
          -   count: 4,
          +   count: 3,
              isTimerRunning: true,
              progress: nil,
              fact: nil
            )

        (Expected: -, Actual: +)
        """
      ]
    )
    await store.skipInFlightEffects()
  }

  @Test func aTestStoreOfAFeatureNamesItsTypes() async {
    let store: TestStoreOf<Stamps> = TestStore(initialState: Stamps.State(id: UUID())) {
      Stamps()
    } withDependencies: {
      $0.date = .constant(Date(timeIntervalSince1970: 0))
    }
    await store.send(.stamp) { $0.stamps = [Date(timeIntervalSince1970: 0)] }
  }

  // MARK: - Waiting for effects

  @Test func finishWaitsForWorkOutsideTheTestStoreAndThenPasses() async {
    let done = LockIsolated(false)
    let store = TestStore(initialState: 0) {
      Reduce<Int, Bool> { _, _ in
        .run { _ in
          // Work the test store's executor cannot see: a detached task.
          await Task.detached { done.setValue(true) }.value
        }
      }
    }
    await store.send(false)
    await store.finish()
    #expect(done.value)
    #expect(store.outsideWorkWaits <= 1)
  }

  @Test func finishReportsEffectsStillInFlight() async {
    let clock = TestClock()
    let issues = await collectingIssues {
      let store = TestStore(initialState: Counter.State()) { Counter(clock: clock) }
      await store.send(.decrementTapped) { $0.count = -1 }
      await store.finish(timeout: .zero)
      await store.skipInFlightEffects()
    }
    #expect(
      issues.map(\.message) == [
        """
        Expected effects to finish, but there are still effects in-flight after waiting 0.0 s.

        Started by:
          .decrementTapped

        An effect that waits on a test clock needs 'advance'; one that waits on work outside the \
        test store (a real clock, a socket, 'Task.detached') needs a test dependency.
        """
      ]
    )
  }

  @Test func aTestStoreTaskFinishWaitsOnTheTestClockAndReportsWhatIsLeft() async {
    let clock = TestClock()
    let store = TestStore(initialState: Counter.State()) { Counter(clock: clock) }
    let task = await store.send(.decrementTapped) { $0.count = -1 }
    let issues = await collectingIssues {
      await task.finish(timeout: .zero)
    }
    #expect(
      issues.map(\.message.firstLine) == [
        "Expected the task to finish, but it is still in-flight."
      ]
    )
    await clock.advance(by: .seconds(1))
    await task.finish(timeout: .zero)
    #expect(task.rawValue.isFinished)
    await store.receive(.decrementDelayResponse) { $0.count = 0 }
  }
}

/// Effects of actions that effects fed back belong to the lifetime of the action that started
/// it all.
@Suite(.timeLimit(.minutes(2))) struct TransitiveLifetimeTests {
  private struct Chain: Reducer {
    enum Action: Equatable, Sendable {
      case start
      case spawn
      case tick
    }

    let clock: TestClock

    func reduce(into state: inout Int, action: Action) -> Effect<Action> {
      switch action {
      case .start:
        return .run { send in await send(.spawn) }
      case .spawn:
        return .run { [clock] send in
          try await clock.sleep(for: .seconds(1))
          await send(.tick)
        }
      case .tick:
        state += 1
        return .none
      }
    }
  }

  @Test func finishWaitsForTheEffectsOfFedBackActions() async {
    let clock = TestClock()
    let store = TestStore(initialState: 0) { Chain(clock: clock) }
    let task = await store.send(.start)
    await store.receive(.spawn)
    #expect(!task.rawValue.isFinished)  // the first effect ended; the spawned one is running
    await clock.advance(by: .seconds(1))
    await store.receive(.tick) { $0 = 1 }
    await task.finish()
    #expect(task.rawValue.isFinished)
  }

  @Test func cancellingCancelsTheEffectsOfFedBackActions() async {
    let clock = TestClock()
    let store = TestStore(initialState: 0) { Chain(clock: clock) }
    let task = await store.send(.start)
    await store.receive(.spawn)
    #expect(clock.sleeperCount == 1)
    await task.cancel()
    #expect(clock.sleeperCount == 0)
    #expect(task.isCancelled && task.rawValue.isFinished)
    await clock.advance(by: .seconds(1))  // nothing arrives
  }
}

import Testing
import Unidirectional
import UnidirectionalTesting

/// An error with a description and type a test can find in the failure's message.
private struct Meltdown: Error, CustomStringConvertible {
  var description: String { "the reactor melted (code 7)" }
}

/// An error with no description of its own: the report names it by its type and case.
enum PlainFailure: Error {
  case timedOut(after: Int)
}

/// A feature whose effects throw with no `catch`, or report an issue, started in four ways.
private struct Faulty: Reducer {
  struct State: Equatable, Sendable { var started = 0 }
  enum Action: Equatable, Sendable {
    case throwNow
    case reportNow
    case throwLater
    case chain
    case chained
    case throwPlain
  }

  let clock: any Clock<Duration>

  func reduce(into state: inout State, action: Action) -> Effect<Action> {
    state.started += 1
    switch action {
    case .throwNow:
      return .run { _ in throw Meltdown() }
    case .reportNow:
      return .run { _ in reportIssue("a double was used: fetchUser") }
    case .throwLater:
      return .send(.throwNow, after: .seconds(1), clock: clock)
    case .chain:
      return .run { send in await send(.chained) }
    case .chained:
      return .run { _ in throw Meltdown() }
    case .throwPlain:
      return .run { _ in throw PlainFailure.timedOut(after: 3) }
    }
  }
}

private func isMeltdown(_ issue: Issue, action: String) -> Bool {
  let text = issue.comments.map(\.rawValue).joined(separator: "\n")
  return text.contains("the reactor melted (code 7)")
    && text.contains("Meltdown")
    && text.contains(action)
    && issue.sourceLocation?.fileID == #fileID
}

@Suite struct EffectIssuesReachTheTestTests {
  @Test func aPlainStoresUncaughtEffectErrorFailsTheTest() async {
    await withKnownIssue {
      let store = Store(initialState: Faulty.State()) { Faulty(clock: ImmediateClock()) }
      await store.send(.throwNow).finish()
    } matching: {
      isMeltdown($0, action: "throwNow")
    }
  }

  @Test func anErrorWithNoDescriptionIsNamedByItsTypeAndCase() async {
    await withKnownIssue {
      let store = Store(initialState: Faulty.State()) { Faulty(clock: ImmediateClock()) }
      await store.send(.throwPlain).finish()
    } matching: { issue in
      let text = issue.comments.map(\.rawValue).joined(separator: "\n")
      return text.contains("timedOut(after: 3)")
        && text.contains("UnidirectionalTestingTests.PlainFailure")
        && text.contains("throwPlain")
    }
  }

  @Test func aPlainStoresReportFromAnEffectFailsTheTest() async {
    await withKnownIssue {
      let store = Store(initialState: Faulty.State()) { Faulty(clock: ImmediateClock()) }
      await store.send(.reportNow).finish()
    } matching: { issue in
      issue.comments.contains { $0.rawValue.contains("a double was used: fetchUser") }
    }
  }

  @Test func anEffectStartedByAnotherEffectFailsTheTest() async {
    await withKnownIssue {
      let store = Store(initialState: Faulty.State()) { Faulty(clock: ImmediateClock()) }
      await store.send(.chain).finish()
    } matching: {
      isMeltdown($0, action: "chained")
    }
  }

  @Test func anEffectStartedByATimerFailsTheTest() async {
    await withKnownIssue {
      let clock = TestClock()
      let store = Store(initialState: Faulty.State()) { Faulty(clock: clock) }
      let task = await store.send(.throwLater)
      await clock.advance(by: .seconds(1))
      await task.finish()
    } matching: {
      isMeltdown($0, action: "throwNow")
    }
  }

  @Test func aStoreMadeOutsideTheKnownIssueScopeStillReportsIntoIt() async {
    let store = Store(initialState: Faulty.State()) { Faulty(clock: ImmediateClock()) }
    await withKnownIssue {
      await store.send(.throwNow).finish()
    } matching: {
      isMeltdown($0, action: "throwNow")
    }
  }

  @Test func aTestStoresTimerStartedEffectFailsTheTest() async {
    await withKnownIssue {
      let clock = TestClock()
      let store = TestStore(initialState: Faulty.State()) { Faulty(clock: clock) }
      await store.send(.throwLater) { $0.started = 1 }
      await clock.advance(by: .seconds(1))
      await store.receive(.throwNow) { $0.started = 2 }
      await store.finish()
    } matching: {
      isMeltdown($0, action: "throwNow")
    }
  }

  @Test func aTestStoresUncaughtEffectErrorFailsTheTest() async {
    await withKnownIssue {
      let store = TestStore(initialState: Faulty.State()) { Faulty(clock: ImmediateClock()) }
      await store.send(.throwNow) { $0.started = 1 }
      await store.finish()
    } matching: {
      isMeltdown($0, action: "throwNow")
    }
  }
}

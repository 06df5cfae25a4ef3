import Testing
import Unidirectional
import UnidirectionalTesting

/// The public observer hook: every kind of event, with origins and outcomes, and scoped stores
/// reporting through their root.
@Suite(.timeLimit(.minutes(1))) struct StoreObserverTests {
  struct Failure: Error, Equatable {}

  enum Action: Sendable, Equatable {
    case increment
    case noop
    case chain
    case load
    case loaded
    case fail
    case wait
    case cancelWait
    case child(ChildAction)
  }

  enum ChildAction: Sendable, Equatable {
    case tap
  }

  struct State: Sendable, Equatable {
    var count = 0
  }

  enum CancelID { case wait }

  static var feature: Reduce<State, Action> {
    Reduce { state, action in
      switch action {
      case .increment, .child(.tap):
        state.count += 1
        return .none
      case .noop, .loaded:
        return .none
      case .chain:
        return .send(.increment)
      case .load:
        return .run { send in await send(.loaded) }
      case .fail:
        return .run { _ in throw Failure() }
      case .wait:
        return .run { _ in await untilCancelled() }.cancellable(id: CancelID.wait)
      case .cancelWait:
        return .cancel(id: CancelID.wait)
      }
    }
  }

  /// Records every event as a line.
  struct Recorder: StoreObserver {
    let lines = LockIsolated<[String]>([])
    let effects = LockIsolated<[EffectReference]>([])
    let origins = LockIsolated<[ActionOrigin]>([])

    func actionReduced(_ action: Action, origin: ActionOrigin) {
      self.origins.withValue { $0.append(origin) }
      let from: String
      switch origin {
      case .send: from = "send"
      case .immediate: from = "immediate"
      case .effect: from = "effect"
      }
      self.lines.withValue { $0.append("reduced \(action) from \(from)") }
    }
    func stateChanged(from oldState: State, to newState: State) {
      self.lines.withValue { $0.append("state \(oldState.count) -> \(newState.count)") }
    }
    func effectStarted(_ effect: EffectReference) {
      self.effects.withValue { $0.append(effect) }
      self.lines.withValue { $0.append("started") }
    }
    func effectEnded(_ effect: EffectReference, outcome: EffectOutcome) {
      let kind: String
      switch outcome {
      case .finished: kind = "finished"
      case .cancelled: kind = "cancelled"
      case .failed(let error): kind = "failed \(error is Failure)"
      }
      self.lines.withValue { $0.append("ended \(kind)") }
    }
    func issueReported(_ issue: ReportedIssue) {
      let firstLine = issue.message.split(separator: "\n").first.map(String.init) ?? ""
      self.lines.withValue { $0.append("issue \(firstLine)") }
    }
    func storeShutDown() {
      self.lines.withValue { $0.append("shut down") }
    }
  }

  @Test func actionsAndStateChangesWithTheirOrigins() async {
    let recorder = Recorder()
    let store = Store(initialState: State(), observer: recorder) { Self.feature }
    await store.send(.increment)
    await store.send(.noop)
    await store.send(.chain)
    #expect(
      recorder.lines.value == [
        "reduced increment from send", "state 0 -> 1",
        // An equatable state that did not change reports no change.
        "reduced noop from send",
        "reduced chain from send", "reduced increment from immediate", "state 1 -> 2",
      ]
    )
  }

  @Test func anEquatableStateWithReferenceFieldsIsComparedByValue() async {
    struct Profile: Sendable, Equatable {
      var name = "Blob"
      var tags: [String] = ["a"]
    }
    struct Changes: StoreObserver {
      typealias Action = String
      let changes = LockIsolated<[String]>([])
      func stateChanged(from oldState: Profile, to newState: Profile) {
        self.changes.withValue {
          $0.append("\(oldState.name)\(oldState.tags) -> \(newState.name)\(newState.tags)")
        }
      }
    }
    let changes = Changes()
    let store = Store(initialState: Profile(), observer: changes) {
      Reduce<Profile, String> { state, action in
        switch action {
        case "rename": state.name = "Blob Jr"
        case "retag": state.tags = ["a"] + ["b"]
        case "same tags": state.tags = ["a", "b"]  // a new array, equal to the one it replaces
        default: break
        }
        return .none
      }
    }
    for action in ["rename", "rename", "retag", "same tags", "noop"] { await store.send(action) }
    #expect(
      changes.changes.value == [
        "Blob[\"a\"] -> Blob Jr[\"a\"]", "Blob Jr[\"a\"] -> Blob Jr[\"a\", \"b\"]",
      ]
    )
  }

  @Test func aRunEffectStartsSendsAndFinishesUnderOneReference() async {
    let recorder = Recorder()
    let store = Store(initialState: State(), observer: recorder) { Self.feature }
    await store.send(.load).finish()
    #expect(
      recorder.lines.value == [
        "reduced load from send", "started", "reduced loaded from effect", "ended finished",
      ]
    )
    #expect(recorder.effects.value.count == 1)
    #expect(recorder.origins.value.last == .effect(recorder.effects.value[0]))
  }

  @Test func aCancelledEffectEndsCancelled() async {
    let recorder = Recorder()
    let (started, didStart) = AsyncStream.makeStream(of: Void.self)
    let store = Store(initialState: State(), observer: recorder) {
      Reduce<State, Action> { _, action in
        switch action {
        case .wait:
          return .run { _ in
            didStart.yield()
            await untilCancelled()
          }
          .cancellable(id: CancelID.wait)
        case .cancelWait:
          return .cancel(id: CancelID.wait)
        default:
          return .none
        }
      }
    }
    let waiting = await store.send(.wait)
    var iterator = started.makeAsyncIterator()
    await iterator.next()
    await store.send(.cancelWait)
    await waiting.finish()
    #expect(
      recorder.lines.value == [
        "reduced wait from send", "started", "reduced cancelWait from send", "ended cancelled",
      ]
    )
  }

  @Test func aThrowingEffectEndsFailedWithItsErrorAndItsIssueIsObserved() async {
    let recorder = Recorder()
    let (_, issues) = await collectingIssues {
      let store = Store(initialState: State(), observer: recorder) { Self.feature }
      await store.send(.fail).finish()
    }
    #expect(issues.count == 1)
    #expect(
      recorder.lines.value.filter { !$0.hasPrefix("shut down") } == [
        "reduced fail from send", "started",
        "issue An 'Effect.run' threw an error and has no 'catch' handler.",
        "ended failed true",
      ]
    )
  }

  /// In production an observed store's effect tasks bind the store's reporter and nothing the
  /// sender bound (in a test they inherit the sender's context): the observer still hears of the
  /// effect, its failure and the issue it reported, and the configured reporter gets the issue.
  @Test func outsideATestAnObservedStoresEffectsStillReportToTheObserver() async {
    let recorder = Recorder()
    let reported = LockIsolated<[String]>([])
    let collecting = IssueReporter { issue in reported.withValue { $0.append(issue.message) } }
    await Task.detached {
      let store = withIssueReporter(collecting) {
        Store(initialState: State(), observer: recorder) {
          Reduce<State, Action> { _, action in
            switch action {
            case .load:
              return .run { _ in reportIssue("from the effect") }
            case .fail:
              return .run { _ in throw Failure() }
            default:
              return .none
            }
          }
        }
      }
      await store.send(.load).finish()
      await store.send(.fail).finish()
      await store.shutdown()
    }.value
    #expect(
      recorder.lines.value == [
        "reduced load from send", "started", "issue from the effect", "ended finished",
        "reduced fail from send", "started",
        "issue An 'Effect.run' threw an error and has no 'catch' handler.",
        "ended failed true", "shut down",
      ]
    )
    #expect(reported.value.count == 2)
    #expect(reported.value.first == "from the effect")
  }

  @Test func shuttingDownIsObservedOnce() async {
    let recorder = Recorder()
    let store = Store(initialState: State(), observer: recorder) { Self.feature }
    await store.shutdown()
    await store.shutdown()
    #expect(recorder.lines.value == ["shut down"])
  }

  @Test func releasingTheStoreIsObservedAsAShutDown() async {
    let recorder = Recorder()
    do {
      let store = Store(initialState: State(), observer: recorder) { Self.feature }
      await store.send(.increment)
    }
    #expect(recorder.lines.value.last == "shut down")
  }

  @Test func aScopedStoreReportsThroughItsRoot() async {
    let recorder = Recorder()
    let store = Store(initialState: State(), observer: recorder) { Self.feature }
    let child = store.scope(state: \.count, action: Action.child)
    await child.send(.tap)
    #expect(recorder.lines.value == ["reduced \(Action.child(.tap)) from send", "state 0 -> 1"])
  }

  @Test func aStoreWithoutAnObserverWorksAsBefore() async {
    let store = Store(initialState: State()) { Self.feature }
    await store.send(.load).finish()
    #expect(await store.state.count == 0)
  }
}

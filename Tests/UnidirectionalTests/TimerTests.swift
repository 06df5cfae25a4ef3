import Testing
import UnidirectionalTesting

@testable import Unidirectional

/// A session with an idle timeout re-armed by every request, and a heartbeat.
private struct Session: Reducer {
  struct State: Equatable, Sendable {
    var requests = 0
    var isIdle = false
    var beats = 0
  }

  enum Action: Equatable, Sendable {
    case request
    case idle
    case startHeartbeat, stopHeartbeat, beat
    case remind(String, after: Duration)
    case reminded(String)
  }

  enum CancelID: Hashable, Sendable { case idle, heartbeat }

  let clock: any Clock<Duration>

  func reduce(into state: inout State, action: Action) -> Effect<Action> {
    switch action {
    case .request:
      state.requests += 1
      state.isIdle = false
      return .send(.idle, after: .seconds(300), clock: self.clock)
        .cancellable(id: CancelID.idle, cancelInFlight: true)
    case .idle:
      state.isIdle = true
      return .none
    case .startHeartbeat:
      return .send(.beat, every: .seconds(1), clock: self.clock)
        .cancellable(id: CancelID.heartbeat, cancelInFlight: true)
    case .stopHeartbeat:
      return .cancel(id: CancelID.heartbeat)
    case .beat:
      state.beats += 1
      return .none
    case .remind(let name, let delay):
      return .send(.reminded(name), after: delay, clock: self.clock)
    case .reminded:
      return .none
    }
  }
}

@Suite(.timeLimit(.minutes(1))) struct TimerEffectTests {
  @Test func anIdleTimerFiresOnceItsDelayHasPassed() async {
    let clock = TestClock()
    let store = TestStore(initialState: Session.State()) { Session(clock: clock) }
    await store.send(.request) { $0.requests = 1 }
    await clock.advance(by: .seconds(299))
    await clock.advance(by: .seconds(1))
    await store.receive(.idle) { $0.isIdle = true }
  }

  @Test func reArmingReplacesTheArmedTimerInPlace() async {
    let clock = TestClock()
    let store = TestStore(initialState: Session.State()) { Session(clock: clock) }
    await store.send(.request) { $0.requests = 1 }
    await clock.advance(by: .seconds(200))
    await store.send(.request) { $0.requests = 2 }
    // The first timer left the clock's queue when it was cancelled: one timer is armed.
    #expect(clock.sleeperCount == 1)
    await clock.advance(by: .seconds(299))
    await store.send(.request) { $0.requests = 3 }
    #expect(clock.sleeperCount == 1)
    await clock.advance(by: .seconds(300))
    await store.receive(.idle) { $0.isIdle = true }
    #expect(clock.sleeperCount == 0)
  }

  /// `.cancellable(id:)` folds its identifier into the timer it wraps (no box of its own); the
  /// timer value it was applied to stays uncancellable, and a second identifier wraps as usual.
  @Test func oneTimerValueMadeCancellableTwiceKeepsEachIdentifierToItsOwnEffect() async {
    struct Shared: Reducer {
      enum ID: Hashable, Sendable { case a, b }
      let clock: TestClock
      func reduce(into state: inout [String], action: String) -> Effect<String> {
        switch action {
        case "arm":
          let timer = Effect<String>.send("fired", after: .seconds(1), clock: self.clock)
          return .merge(
            timer,
            timer.cancellable(id: ID.a),
            timer.cancellable(id: ID.b),
            timer.cancellable(id: ID.a).cancellable(id: ID.b)
          )
        case "cancel a":
          return .cancel(id: ID.a)
        case "fired":
          state.append(action)
          return .none
        default:
          return .none
        }
      }
    }
    let clock = TestClock()
    let store = TestStore(initialState: [String]()) { Shared(clock: clock) }
    await store.send("arm")
    #expect(clock.sleeperCount == 4)
    // `a` reaches the two timers made cancellable with it, not the plain one nor the one with `b`.
    await store.send("cancel a")
    #expect(clock.sleeperCount == 2)
    await clock.advance(by: .seconds(1))
    await store.receive("fired") { $0 = ["fired"] }
    await store.receive("fired") { $0 = ["fired", "fired"] }
  }

  @Test func aHeartbeatTicksAtEveryIntervalInOrderUntilCancelled() async {
    let clock = TestClock()
    let store = TestStore(initialState: Session.State()) { Session(clock: clock) }
    await store.send(.startHeartbeat)
    await clock.advance(by: .seconds(1))
    await store.receive(.beat) { $0.beats = 1 }
    await clock.advance(by: .seconds(4))
    await store.receive(.beat) { $0.beats = 2 }
    await store.receive(.beat) { $0.beats = 3 }
    await store.receive(.beat) { $0.beats = 4 }
    await store.receive(.beat) { $0.beats = 5 }
    await store.send(.stopHeartbeat)
    #expect(clock.sleeperCount == 0)
    await clock.advance(by: .seconds(10))
  }

  @Test func timersDueAtTheSameInstantFireInArmingOrder() async {
    let clock = TestClock()
    let store = TestStore(initialState: Session.State()) { Session(clock: clock) }
    await store.send(.remind("b", after: .seconds(2)))
    await store.send(.remind("a1", after: .seconds(1)))
    await store.send(.remind("c", after: .seconds(2)))
    await store.send(.remind("a2", after: .seconds(1)))
    await clock.advance(by: .seconds(2))
    await store.receive(.reminded("a1"))
    await store.receive(.reminded("a2"))
    await store.receive(.reminded("b"))
    await store.receive(.reminded("c"))
  }

  @Test func timersAndSleepingEffectsWakeInOneOrder() async {
    struct Mixed: Reducer {
      let clock: TestClock
      func reduce(into state: inout [String], action: String) -> Effect<String> {
        switch action {
        case "start":
          return .merge(
            .send("timer 1s", after: .seconds(1), clock: self.clock),
            .run { [clock] send in
              try await clock.sleep(for: .seconds(1))
              await send("sleep 1s")
            },
            .send("timer 0.5s", after: .milliseconds(500), clock: self.clock)
          )
        default:
          state.append(action)
          return .none
        }
      }
    }
    let clock = TestClock()
    let store = TestStore(initialState: [String]()) { Mixed(clock: clock) }
    await store.send("start")
    await clock.advance(by: .seconds(1))
    await store.receive("timer 0.5s") { $0 = ["timer 0.5s"] }
    await store.receive("timer 1s") { $0.append("timer 1s") }
    await store.receive("sleep 1s") { $0.append("sleep 1s") }
  }

  @Test func aZeroDelayFiresAtTheNextAdvance() async {
    let clock = TestClock()
    let store = TestStore(initialState: Session.State()) { Session(clock: clock) }
    await store.send(.remind("now", after: .zero))
    await store.send(.remind("past", after: .seconds(-5)))
    await clock.advance()
    await store.receive(.reminded("now"))
    await store.receive(.reminded("past"))
  }

  @Test func aTimerIsAnEffectOfItsActionUntilItFires() async {
    let clock = TestClock()
    let store = Store(initialState: Session.State()) { Session(clock: clock) }
    let task = await store.send(.remind("x", after: .seconds(1)))
    #expect(store.liveEffectCount == 1)
    await clock.advance(by: .seconds(1))
    await task.finish()
    #expect(store.liveEffectCount == 0)
    await store.shutdown()
  }

  @Test func cancellingTheStoreTaskDisarmsTheTimer() async {
    let clock = TestClock()
    let store = Store(initialState: Session.State()) { Session(clock: clock) }
    let task = await store.send(.request)
    #expect(clock.sleeperCount == 1)
    task.cancel()
    await task.finish()
    #expect(clock.sleeperCount == 0)
    await clock.advance(by: .seconds(301))
    #expect(await store.state.isIdle == false)
    await store.shutdown()
  }

  @Test func shuttingDownDisarmsEveryTimerAndLaterArmingsDoNothing() async {
    let clock = TestClock()
    let store = Store(initialState: Session.State()) { Session(clock: clock) }
    await store.send(.request)
    await store.send(.startHeartbeat)
    #expect(clock.sleeperCount == 2)
    await store.shutdown()
    #expect(clock.sleeperCount == 0)
    #expect(store.liveEffectCount == 0)
    await clock.advance(by: .seconds(600))
    #expect(await store.state == Session.State(requests: 1))
  }

  @Test func aHeartbeatWithoutAPositiveIntervalIsReportedAndDoesNothing() async {
    let clock = TestClock()
    let (effect, issues) = await collectingIssues {
      Effect<Session.Action>.send(.beat, every: .zero, clock: clock)
    }
    #expect(issues.count == 1)
    #expect(issues.first?.message.contains("interval that is not positive") == true)
    #expect(issues.first?.message.contains(".beat") == true)
    #expect(effect.hasAsynchronousWork == false)
  }

  @Test func aClockWithNoTimerQueueRunsTheTimerAsATask() async {
    // ImmediateClock: every sleep returns at once.
    let store = Store(initialState: Session.State()) { Session(clock: ImmediateClock()) }
    await store.send(.request).finish()
    #expect(await store.state.isIdle)
    await store.shutdown()
  }

  @Test func aTimerInsideAConcatenationWaitsForItsTurn() async {
    struct Steps: Reducer {
      let clock: TestClock
      func reduce(into state: inout [String], action: String) -> Effect<String> {
        switch action {
        case "start":
          return .concatenate(
            .run { send in await send("first") },
            .send("second", after: .seconds(1), clock: self.clock)
          )
        default:
          state.append(action)
          return .none
        }
      }
    }
    let clock = TestClock()
    let store = TestStore(initialState: [String]()) { Steps(clock: clock) }
    await store.send("start")
    await store.receive("first") { $0 = ["first"] }
    await clock.advance(by: .seconds(1))
    await store.receive("second") { $0.append("second") }
  }

  @Test func aMappedTimerSendsTheParentsAction() async {
    let clock = TestClock()
    let effect = Effect<Session.Action>.send(.idle, after: .seconds(1), clock: ImmediateClock())
      .map { "\($0)" }
    var actions: [String] = []
    for await action in effect { actions.append(action) }
    #expect(actions == ["idle"])
    _ = clock
  }

  @Test func aContinuousClockTimerFiresThroughTheSharedService() async {
    let store = Store(initialState: Session.State()) { Session(clock: ContinuousClock()) }
    await store.send(.remind("soon", after: .milliseconds(1))).finish()
    await store.send(.request)
    #expect(store.liveEffectCount == 1)
    await store.shutdown()
    #expect(store.liveEffectCount == 0)
  }

  /// The services read the system clock directly (`SystemClock`): their time must be the clock's,
  /// so that no timer fires before its delay has passed on the clock it was armed on.
  @Test(arguments: [true, false])
  func aSystemClockTimerNeverFiresBeforeItsDelayHasPassedOnItsClock(continuous: Bool) async {
    struct Stopwatch: Reducer {
      enum Action: Sendable { case arm(Duration), fired(Duration) }
      let clock: any Clock<Duration>
      let elapsed: @Sendable () -> Duration
      /// Each delay's arming time, then the time from its arming to its firing.
      func reduce(into state: inout [Duration: Duration], action: Action) -> Effect<Action> {
        switch action {
        case .arm(let delay):
          state[delay] = self.elapsed()
          return .send(.fired(delay), after: delay, clock: self.clock)
        case .fired(let delay):
          state[delay] = self.elapsed() - (state[delay] ?? .zero)
          return .none
        }
      }
    }
    let clock: any Clock<Duration> = continuous ? ContinuousClock() : SuspendingClock()
    let start = ContinuousClock.now
    let suspendingStart = SuspendingClock.now
    let elapsed: @Sendable () -> Duration
    if continuous {
      elapsed = { start.duration(to: ContinuousClock.now) }
    } else {
      elapsed = { suspendingStart.duration(to: SuspendingClock.now) }
    }
    let store = Store(initialState: [Duration: Duration]()) {
      Stopwatch(clock: clock, elapsed: elapsed)
    }
    let delays: [Duration] = [
      .microseconds(1), .microseconds(300), .milliseconds(2), .milliseconds(7),
    ]
    var tasks: [StoreTask] = []
    for delay in delays { tasks.append(await store.send(.arm(delay))) }
    for task in tasks { await task.finish() }
    let measured = await store.state
    for delay in delays {
      #expect(
        measured[delay].map { $0 >= delay } == true,
        "\(delay) fired after \(measured[delay] ?? .zero)"
      )
    }
    await store.shutdown()
  }

  @Test func aDriverWakesAtTheFirstMillisecondAtOrAfterADeadline() {
    typealias Service = TimerService<ContinuousClock>
    let cases: [(deadline: Duration, wake: Duration)] = [
      (.zero, .zero),
      (.nanoseconds(1), .milliseconds(1)),
      (Duration(attoseconds: 1), .milliseconds(1)),
      (.milliseconds(1), .milliseconds(1)),
      (.milliseconds(1) + Duration(attoseconds: 1), .milliseconds(2)),
      (.microseconds(2_999), .milliseconds(3)),
      (.seconds(300) + .microseconds(1), .seconds(300) + .milliseconds(1)),
      // Before the service's first reading (a timer armed from an instant read earlier).
      (.microseconds(-500), .zero),
      (.microseconds(-1_500), .milliseconds(-1)),
      (.milliseconds(-2), .milliseconds(-2)),
    ]
    for (deadline, wake) in cases {
      #expect(Service.wakeTime(for: deadline) == wake, "\(deadline)")
    }
  }

  @Test func aServicesTimeIsItsClocksTime() {
    let service = TimerService(clock: ContinuousClock())
    for _ in 0..<200 {
      // Read between two readings of the clock, the service's two readings lie between them;
      // around them, they span at least the clock's.
      let outerStart = service.nowNanoseconds
      let before = ContinuousClock.now
      let first = service.nowOffset
      // NB: at least 50 µs between the readings. (This counted its spins and expected one:
      // under ThreadSanitizer on a loaded machine, reading the service's offset alone took that
      // long, and no spin was needed.)
      while before.duration(to: .now) < .microseconds(50) {}
      let second = service.nowNanoseconds
      let after = ContinuousClock.now
      let outerEnd = service.nowOffset
      #expect(before.duration(to: after) >= .microseconds(50))
      #expect(first <= .nanoseconds(second))
      #expect(.nanoseconds(second) - first <= before.duration(to: after) + .nanoseconds(1))
      #expect(outerEnd - .nanoseconds(outerStart) + .nanoseconds(1) >= before.duration(to: after))
    }
  }
}

/// The heap behind every timer service, on its own.
@Suite struct TimerQueueTests {
  private final class Entry: TimerEntry, @unchecked Sendable {
    let name: String
    init(_ name: String, at seconds: Int64) {
      self.name = name
      super.init(lifetime: nil, host: TestClock(), deadline: .seconds(seconds))
    }
  }

  @Test func entriesLeaveInDeadlineOrderTiesInArmingOrder() {
    var queue = TimerQueue()
    for (name, seconds) in [("c", 3), ("a1", 1), ("b", 2), ("a2", 1), ("a3", 1)] {
      queue.insert(Entry(name, at: Int64(seconds)))
    }
    var order: [String] = []
    while let entry = queue.popFirst() { order.append((entry as? Entry)?.name ?? "?") }
    #expect(order == ["a1", "a2", "a3", "b", "c"])
  }

  @Test func aRemovedEntryLeavesAtOnceAndTheRestKeepTheirOrder() {
    var queue = TimerQueue()
    let entries = (0..<50).map { Entry("\($0)", at: Int64(($0 * 37) % 50)) }
    for entry in entries { queue.insert(entry) }
    for entry in entries where Int(entry.name)! % 3 == 0 {
      let removed = queue.remove(entry)
      let removedAgain = queue.remove(entry)
      #expect(removed)
      #expect(entry.heapIndex == -1)
      #expect(!removedAgain)
    }
    var due: [TimerEntry] = []
    queue.popDue(by: .seconds(100), into: &due)
    let deadlines = due.map(\.deadline)
    #expect(deadlines == deadlines.sorted())
    #expect(due.count == entries.filter { Int($0.name)! % 3 != 0 }.count)
    #expect(queue.isEmpty)
  }

  // NB: with deadlines over 4 s, most entries share a deadline with others, so ties between
  // entries re-armed in place and entries armed since are common.
  @Test(arguments: [1, 2, 3, 4, 5] as [UInt64], [4, 100] as [UInt64])
  func randomArmsRearmsAndRemovesMatchASortedModel(seed: UInt64, span: UInt64) {
    var random = SplitMix64(state: seed)
    var queue = TimerQueue()
    var model: [(deadline: Int64, order: Int, entry: Entry)] = []
    var order = 0
    for _ in 0..<2_000 {
      switch random.next() % 6 {
      case 4:
        // A re-arm, to a later deadline as often as an earlier one: arming anew, behind every
        // entry armed before at that deadline.
        guard !model.isEmpty else { continue }
        let index = Int(random.next() % UInt64(model.count))
        let deadline = Int64(random.next() % span)
        let moved = queue.reschedule(model[index].entry, to: .seconds(deadline))
        #expect(moved)
        model[index].deadline = deadline
        model[index].order = order
        order += 1
      case 0, 1:
        let entry = Entry("\(order)", at: Int64(random.next() % span))
        queue.insert(entry)
        model.append((entry.deadline.components.seconds, order, entry))
        order += 1
      case 2:
        guard !model.isEmpty else { continue }
        let index = Int(random.next() % UInt64(model.count))
        let removed = queue.remove(model[index].entry)
        #expect(removed)
        model.remove(at: index)
      default:
        let now = Int64(random.next() % span)
        var due: [TimerEntry] = []
        queue.popDue(by: .seconds(now), into: &due)
        let expected = model.filter { $0.deadline <= now }
          .sorted { ($0.deadline, $0.order) < ($1.deadline, $1.order) }
        #expect(due.map { ObjectIdentifier($0) } == expected.map { ObjectIdentifier($0.entry) })
        model.removeAll { $0.deadline <= now }
        // Due entries gone, the queue's next deadline is the earliest entry's own, re-armed
        // later or not.
        #expect(queue.nextDeadline == model.map(\.deadline).min().map { .seconds($0) })
      }
      #expect(queue.count == model.count)
    }
    var rest: [TimerEntry] = []
    while let entry = queue.popFirst() { rest.append(entry) }
    let expected = model.sorted { ($0.deadline, $0.order) < ($1.deadline, $1.order) }
    #expect(rest.map { ObjectIdentifier($0) } == expected.map { ObjectIdentifier($0.entry) })
  }

  @Test func aLaterReArmLeavesTheHeapUntilItsOldPlaceComesDue() {
    var queue = TimerQueue()
    let idle = Entry("idle", at: 10)
    let other = Entry("other", at: 20)
    queue.insert(idle)
    queue.insert(other)
    queue.reschedule(idle, to: .seconds(30))
    // The heap has not moved: its next deadline is still the idle timer's old one, and nothing
    // fires there.
    #expect(queue.nextDeadline == .seconds(10))
    var due: [TimerEntry] = []
    queue.popDue(by: .seconds(10), into: &due)
    #expect(due.isEmpty)
    #expect(queue.nextDeadline == .seconds(20))
    queue.popDue(by: .seconds(29), into: &due)
    #expect(due.map { ($0 as? Entry)?.name } == ["other"])
    // Re-armed earlier, it moves at once; removed, it leaves from wherever it is.
    queue.reschedule(idle, to: .seconds(5))
    #expect(queue.nextDeadline == .seconds(5))
    queue.reschedule(idle, to: .seconds(50))
    let removed = queue.remove(idle)
    #expect(removed)
    #expect(idle.heapIndex == -1)
    #expect(queue.isEmpty)
    #expect(queue.nextDeadline == nil)
  }
}

import Testing

@testable import Unidirectional

/// The effect bookkeeping on its own: every transition of the state machine, valid and invalid,
/// with strings standing for jobs, waiting tasks and task handles (no tasks, no locks).
@Suite(.timeLimit(.minutes(2))) struct EffectStateMachineTests {
  typealias Machine = EffectStateMachine<String, String, String>

  private let key = CancelKey("key", scope: nil)
  private let other = CancelKey("other", scope: nil)

  @Test func queuePlacesAreServedInTheOrderTheyWereTaken() {
    var queues = OrderedQueues<String>()
    let first = queues.enqueue(on: self.key)
    let second = queues.enqueue(on: self.key)
    let third = queues.enqueue(on: self.key)
    let elsewhere = queues.enqueue(on: self.other)
    #expect(queues.count == 2)
    // The first place's turn is now; another queue is independent.
    #expect(queues.waitForTurn(first, "first") == "first")
    #expect(queues.waitForTurn(elsewhere, "elsewhere") == "elsewhere")
    #expect(queues.waitForTurn(third, "third") == nil)
    #expect(queues.waitForTurn(second, "second") == nil)
    // Leaving hands the turn to the next place only.
    #expect(queues.leave(first) == "second")
    #expect(queues.leave(second) == "third")
    #expect(queues.leave(third) == nil)
    #expect(queues.leave(elsewhere) == nil)
    // Queues nobody holds a place in are forgotten.
    #expect(queues.count == 0)
  }

  @Test func aPlaceGivenUpBeforeItsTurnIsSkipped() {
    var queues = OrderedQueues<String>()
    let first = queues.enqueue(on: self.key)
    let second = queues.enqueue(on: self.key)
    let third = queues.enqueue(on: self.key)
    #expect(queues.waitForTurn(third, "third") == nil)
    // The second place is abandoned while the first runs: nothing moves yet.
    #expect(queues.leave(second) == nil)
    #expect(queues.count == 1)
    // When the first leaves, the turn skips the second.
    #expect(queues.leave(first) == "third")
    #expect(queues.leave(third) == nil)
    #expect(queues.count == 0)
    // A place taken after the queue was forgotten starts a new one, whose turn is now.
    let again = queues.enqueue(on: self.key)
    #expect(queues.waitForTurn(again, "again") == "again")
  }

  @Test func aUnitRunsAndFinishesItsLifetime() {
    var machine = Machine()
    let unit = EffectToken(lifetime: nil)
    machine.register(unit, keys: [self.key])
    #expect(machine.liveCount == 1)
    #expect(machine.count(under: self.key) == 1)
    #expect(machine.wait(for: unit, "finish()") == nil)
    guard case .run = machine.start(unit.id, in: "task") else {
      Issue.record("a registered unit did not start")
      return
    }
    guard case .finished(let resumptions) = machine.finish(unit.id) else {
      Issue.record("an unpinned unit did not finish")
      return
    }
    #expect(resumptions.all == ["finish()"])
    #expect(unit.isFinished && !unit.isCancelled)
    #expect(machine.liveCount == 0)
    #expect(machine.registeredIdentifierCount == 0)
    #expect(machine.isFinished(unit))
  }

  @Test func unitsJoinTheirLifetimeAndItFinishesWithTheLast() {
    var machine = Machine()
    let first = EffectToken(lifetime: nil)
    let second = EffectToken(lifetime: first)
    machine.register(first, keys: [])
    machine.register(second, keys: [self.key])
    #expect(machine.wait(for: first, "waiter") == nil)
    _ = machine.start(first.id, in: "a")
    _ = machine.start(second.id, in: "b")
    guard case .finished(let early) = machine.finish(first.id) else { return }
    #expect(early.isEmpty)
    #expect(!machine.isFinished(first))
    guard case .finished(let last) = machine.finish(second.id) else { return }
    #expect(last.all == ["waiter"])
  }

  @Test func waitingOnAFinishedLifetimeReturnsAtOnce() {
    var machine = Machine()
    let unit = EffectToken(lifetime: nil)
    #expect(machine.wait(for: unit, "waiter") == "waiter")
  }

  @Test func cancellingAPendingUnitFinishesItBeforeItRuns() {
    var machine = Machine()
    let unit = EffectToken(lifetime: nil)
    machine.register(unit, keys: [self.key])
    #expect(machine.wait(for: unit, "waiter") == nil)
    let cancellation = machine.cancel([self.key])
    #expect(cancellation.tasks.isEmpty)
    #expect(cancellation.resumptions.all == ["waiter"])
    #expect(unit.isCancelled && unit.isFinished)
    guard case .skip(let resumptions) = machine.start(unit.id, in: "task") else {
      Issue.record("a cancelled unit started")
      return
    }
    #expect(resumptions.isEmpty)
  }

  @Test func cancellingARunningUnitPinsItsTaskUntilTheCancellerIsDone() {
    var machine = Machine()
    let unit = EffectToken(lifetime: nil)
    machine.register(unit, keys: [self.key, self.other])
    _ = machine.start(unit.id, in: "task")
    let cancellation = machine.cancel([self.key, self.other])
    #expect(cancellation.tasks.map(\.1) == ["task"])  // once, though under two keys
    #expect(unit.isCancelled && !unit.isFinished)
    // The task returns while the canceller still holds its handle: it must wait.
    guard case .waitForCancellers = machine.finish(unit.id) else {
      Issue.record("a pinned unit finished")
      return
    }
    #expect(machine.parkFinishing(unit.id, waiter: "finishing task") == nil)
    #expect(machine.unpin(cancellation.tasks.map(\.0)).all == ["finishing task"])
    guard case .finished = machine.finish(unit.id) else { return }
    #expect(unit.isFinished)
    #expect(machine.liveCount == 0)
  }

  @Test func aFinishingTaskParkedAfterTheCancellerWasDoneGoesOnAtOnce() {
    var machine = Machine()
    let unit = EffectToken(lifetime: nil)
    machine.register(unit, keys: [self.key])
    _ = machine.start(unit.id, in: "task")
    let cancellation = machine.cancel([self.key])
    guard case .waitForCancellers = machine.finish(unit.id) else { return }
    #expect(machine.unpin(cancellation.tasks.map(\.0)).isEmpty)
    #expect(machine.parkFinishing(unit.id, waiter: "finishing task") == "finishing task")
  }

  @Test func cancellingTwiceTakesOnePin() {
    var machine = Machine()
    let unit = EffectToken(lifetime: nil)
    machine.register(unit, keys: [self.key])
    _ = machine.start(unit.id, in: "task")
    #expect(machine.cancel([self.key]).tasks.count == 1)
    #expect(machine.cancel([self.key]).tasks.isEmpty)
  }

  @Test func cancellingAnUnknownIdentifierDoesNothing() {
    var machine = Machine()
    let unit = EffectToken(lifetime: nil)
    machine.register(unit, keys: [self.key])
    let cancellation = machine.cancel([self.other])
    #expect(cancellation.tasks.isEmpty && cancellation.resumptions.isEmpty)
    #expect(!unit.isCancelled)
  }

  @Test func aCancelledLifetimeCancelsItsUnitsAndTheOnesThatJoinLater() {
    var machine = Machine()
    let first = EffectToken(lifetime: nil)
    machine.register(first, keys: [])
    _ = machine.start(first.id, in: "task")
    let cancellation = machine.cancel(lifetime: first)
    #expect(cancellation.tasks.map(\.1) == ["task"])
    #expect(first.isLifetimeCancelled)
    let late = EffectToken(lifetime: first)
    machine.register(late, keys: [self.key])
    #expect(late.isCancelled && late.isFinished)
    #expect(machine.count(under: self.key) == 0)
  }

  @Test func cancelAllCancelsEveryLifetimeButLeavesTheStoreOpen() {
    var machine = Machine()
    let one = EffectToken(lifetime: nil)
    let two = EffectToken(lifetime: nil)
    machine.register(one, keys: [])
    machine.register(two, keys: [])
    _ = machine.start(one.id, in: "one")
    let cancellation = machine.cancelAll()
    #expect(cancellation.tasks.map(\.1) == ["one"])
    #expect(two.isFinished)
    #expect(one.isLifetimeCancelled && two.isLifetimeCancelled)
    let fresh = EffectToken(lifetime: nil)
    machine.register(fresh, keys: [])
    #expect(!fresh.isCancelled)
  }

  @Test func submittedJobsAreCountedUntilTheirTasksEnd() {
    var machine = Machine()
    guard case .run = machine.submit(["a", "b"]) else {
      Issue.record("an open store refused jobs")
      return
    }
    #expect(machine.liveJobs == 2)
    // Idle waits for the tasks too, not only for units.
    let ticket = machine.makeIdleTicket()
    #expect(machine.waitUntilIdle("idle", ticket: ticket, cancelled: false) == nil)
    var end = machine.jobEnded()
    #expect(end.resumptions.isEmpty && !end.ended)
    end = machine.jobEnded()
    #expect(end.resumptions.all == ["idle"])
    #expect(!end.ended)  // not shut down: nothing to let go of
    #expect(machine.isIdle)
  }

  @Test func aJobWhoseUnitsAreLiveKeepsTheMachineBusy() {
    var machine = Machine()
    let unit = EffectToken(lifetime: nil)
    machine.register(unit, keys: [])
    _ = machine.submit(["job"])
    _ = machine.start(unit.id, in: "task")
    let ticket = machine.makeIdleTicket()
    #expect(machine.waitUntilIdle("idle", ticket: ticket, cancelled: false) == nil)
    guard case .finished(let resumptions) = machine.finish(unit.id) else { return }
    #expect(resumptions.isEmpty)  // the job's task has not ended yet
    #expect(machine.jobEnded().resumptions.all == ["idle"])
  }

  @Test func shuttingDownCancelsEverythingAndTheLastTaskToEndSaysSo() {
    var machine = Machine()
    let running = EffectToken(lifetime: nil)
    let pending = EffectToken(lifetime: nil)
    machine.register(running, keys: [])
    machine.register(pending, keys: [])
    _ = machine.submit(["first", "second"])
    _ = machine.start(running.id, in: "task")
    let shutDown = machine.shutDown()
    #expect(shutDown.cancellation.tasks.map(\.1) == ["task"])
    #expect(!shutDown.ended)  // two tasks are alive
    #expect(pending.isFinished && running.isCancelled)
    // Later work is refused, and units are born cancelled.
    guard case .abandon = machine.submit(["late"]) else {
      Issue.record("a store that shut down accepted a job")
      return
    }
    #expect(machine.liveJobs == 2)
    let late = EffectToken(lifetime: nil)
    machine.register(late, keys: [])
    #expect(late.isCancelled && late.isFinished)
    // The tasks end: the last one, once its unit has finished, is told everything ended.
    #expect(!machine.jobEnded().ended)
    _ = machine.unpin([running.id])
    _ = machine.finish(running.id)
    #expect(machine.jobEnded().ended)
    // Shutting down again does nothing more.
    let again = machine.shutDown()
    #expect(!again.ended && again.cancellation.tasks.isEmpty)
  }

  // MARK: - Listed units (a `.run` with no identifier)

  /// A `.run`'s unit as the planner makes it when it has no identifier: listed.
  private func listedUnit(lifetime: (any EffectUnit)? = nil) -> RunUnit {
    let unit = RunUnit(lifetime: lifetime)
    unit.insertFlags(UnitFlags.startsUnlocked)
    return unit
  }

  @Test func aListedUnitStartsWithoutTheMachineAndFinishesItsLifetime() {
    var machine = Machine()
    let timer = EffectToken(lifetime: nil)
    machine.register(timer, keys: [self.key])
    let run = self.listedUnit(lifetime: timer)
    machine.register(run, keys: [])
    #expect(machine.liveCount == 2)
    #expect(machine.count(under: self.key) == 1)
    #expect(machine.wait(for: timer, "finish()") == nil)
    // Its task starts it on its own: nothing in the machine changes.
    #expect(run.startUnlocked(in: 7))
    #expect(machine.runningUnit(where: { $0 == "task 7" }) == run.id)
    #expect(machine.lifetime(timer, hasUnitRunningWhere: { $0 == "task 7" }))
    guard case .finished(let none) = machine.finish(unit: run) else {
      Issue.record("an unpinned listed unit did not finish")
      return
    }
    #expect(none.isEmpty)  // the timer is still live in the lifetime
    #expect(run.isFinished && !run.isCancelled)
    #expect(machine.liveCount == 1)
    guard case .run = machine.start(timer.id, in: "timer task"),
      case .finished(let resumptions) = machine.finish(timer.id)
    else {
      Issue.record("the timer's unit did not run")
      return
    }
    #expect(resumptions.all == ["finish()"])
    #expect(machine.isFinished(timer) && machine.isIdle)
  }

  @Test func aListedUnitCancelledBeforeItsTaskStartsItDoesNotRun() {
    var machine = Machine()
    let run = self.listedUnit()
    machine.register(run, keys: [])
    #expect(machine.wait(for: run, "finish()") == nil)
    let cancellation = machine.cancel(lifetime: run)
    #expect(cancellation.tasks.isEmpty && cancellation.listedTasks.isEmpty)
    #expect(cancellation.resumptions.all == ["finish()"])
    #expect(run.isCancelled && run.isFinished)
    // Its task comes too late: it does not start, and settling it again does nothing.
    #expect(!run.startUnlocked(in: 7))
    #expect(machine.skipListed(run).isEmpty)
    #expect(machine.liveCount == 0 && machine.isIdle)
  }

  @Test func aTaskThatFindsItsListedUnitCancelledButNotFinishedFinishesIt() {
    var machine = Machine()
    let run = self.listedUnit()
    machine.register(run, keys: [])
    #expect(machine.wait(for: run, "finish()") == nil)
    run.markCancelled()  // as if by a canceller between its two steps
    #expect(!run.startUnlocked(in: 7))
    #expect(machine.skipListed(run).all == ["finish()"])
    #expect(run.isFinished && machine.isIdle)
  }

  @Test func cancellingARunningListedUnitPinsItsTaskUntilTheCancellerIsDone() {
    var machine = Machine()
    let run = self.listedUnit()
    machine.register(run, keys: [])
    #expect(run.startUnlocked(in: 7))
    let cancellation = machine.cancel(lifetime: run)
    #expect(cancellation.tasks.isEmpty)
    #expect(cancellation.listedTasks.map(\.1) == ["task 7"])
    #expect(run.isCancelled && !run.isFinished)
    // Cancelling again takes no second pin.
    #expect(machine.cancel(lifetime: run).listedTasks.isEmpty)
    guard case .waitForCancellers = machine.finish(unit: run) else {
      Issue.record("a pinned listed unit finished")
      return
    }
    #expect(machine.parkFinishing(unit: run, waiter: "finishing task") == nil)
    #expect(machine.unpinListed(cancellation.listedTasks.map(\.0)).all == ["finishing task"])
    guard case .finished = machine.finish(unit: run) else {
      Issue.record("an unpinned listed unit did not finish")
      return
    }
    #expect(run.isFinished && machine.isIdle)
    // Unpinning a unit with no pin does nothing.
    #expect(machine.unpinListed([run]).isEmpty)
  }

  @Test func aListedFinishingTaskParkedAfterTheCancellerWasDoneGoesOnAtOnce() {
    var machine = Machine()
    let run = self.listedUnit()
    machine.register(run, keys: [])
    #expect(run.startUnlocked(in: 7))
    let cancellation = machine.cancel(lifetime: run)
    guard case .waitForCancellers = machine.finish(unit: run) else { return }
    #expect(machine.unpinListed(cancellation.listedTasks.map(\.0)).isEmpty)
    #expect(machine.parkFinishing(unit: run, waiter: "finishing task") == "finishing task")
    guard case .finished = machine.finish(unit: run) else { return }
    #expect(run.isFinished && machine.isIdle)
  }

  @Test func shuttingDownCancelsListedUnitsRunningOrNot() {
    var machine = Machine()
    let running = self.listedUnit()
    let pending = self.listedUnit()
    let marked = self.listedUnit()
    marked.insertFlags(UnitFlags.cancelledOnShutdown)
    for unit in [running, pending, marked] { machine.register(unit, keys: []) }
    #expect(running.startUnlocked(in: 1))
    // A graceful shutdown cancels only the marked one.
    let draining = machine.cancelMarkedForShutdown()
    #expect(draining.listedTasks.isEmpty && marked.isFinished)
    #expect(!pending.isCancelled && !running.isCancelled)
    let shutDown = machine.shutDown()
    #expect(shutDown.cancellation.listedTasks.map(\.1) == ["task 1"])
    #expect(pending.isCancelled && pending.isFinished)
    #expect(running.isCancelled && !running.isFinished)
    #expect(machine.liveCount == 1)
    // One registered after shutdown is born cancelled, and never listed.
    let late = self.listedUnit()
    machine.register(late, keys: [])
    #expect(late.isFinished && machine.liveCount == 1)
    _ = machine.unpinListed([running])
    guard case .finished = machine.finish(unit: running) else { return }
    #expect(machine.isIdle)
  }

  @Test func abandoningAListedUnitFinishesItOnlyIfItDidNotStart() {
    var machine = Machine()
    let started = self.listedUnit()
    let abandoned = self.listedUnit()
    machine.register(started, keys: [])
    machine.register(abandoned, keys: [])
    #expect(started.startUnlocked(in: 1))
    #expect(machine.wait(for: abandoned, "waiter") == nil)
    #expect(machine.abandon(unit: abandoned).all == ["waiter"])
    #expect(abandoned.isCancelled && abandoned.isFinished)
    #expect(machine.abandon(unit: started).isEmpty)
    #expect(!started.isFinished && machine.liveCount == 1)
    #expect(machine.unit(started.id) === started)
    guard case .finished = machine.finish(unit: started) else { return }
    #expect(machine.isIdle)
  }

  @Test func aMachineLetGoOfWithUnitsStillListedLetsGoOfThem() {
    weak var leftOver: RunUnit?
    do {
      var machine = Machine()
      let units = (0..<3).map { _ in self.listedUnit() }
      for unit in units { machine.register(unit, keys: []) }
      leftOver = units[1]
      machine.releaseListed()
      #expect(machine.liveCount == 0 && machine.isIdle)
      // Unfinished, but no longer held by the machine.
      #expect(units.allSatisfy { !$0.isFinished })
    }
    #expect(leftOver == nil)
  }

  @Test func cancellingEverythingReachesListedUnitsInAnyPlaceOfTheList() {
    var machine = Machine()
    let units = (0..<5).map { _ in self.listedUnit() }
    for unit in units { machine.register(unit, keys: []) }
    // The middle, the first and the last ones finish first: the list stays linked.
    for index in [2, 4, 0] {
      #expect(units[index].startUnlocked(in: UInt(index + 1)))
      guard case .finished = machine.finish(unit: units[index]) else { return }
    }
    #expect(machine.liveCount == 2)
    let cancellation = machine.cancelAll()
    #expect(cancellation.listedTasks.isEmpty)
    #expect(units.allSatisfy { $0.isFinished })
    #expect(machine.isIdle)
  }

  @Test func shuttingDownWithNoTaskAliveEndsAtOnce() {
    var machine = Machine()
    #expect(machine.shutDown().ended)
    #expect(!machine.shutDown().ended)
  }

  @Test func aJobEndingThatWasNeverSubmittedIsAProgrammingError() async {
    await #expect(processExitsWith: .failure) {
      var machine = EffectStateMachine<String, String, String>()
      _ = machine.jobEnded()
    }
  }

  @Test func aUnitThatStartsAfterShutdownDoesNotRun() {
    var machine = Machine()
    let unit = EffectToken(lifetime: nil)
    machine.register(unit, keys: [])
    _ = machine.shutDown()
    guard case .skip = machine.start(unit.id, in: "task") else {
      Issue.record("a unit started after shutdown")
      return
    }
  }

  @Test func abandoningFinishesOnlyPendingUnits() {
    var machine = Machine()
    let pending = EffectToken(lifetime: nil)
    let running = EffectToken(lifetime: nil)
    machine.register(pending, keys: [])
    machine.register(running, keys: [])
    _ = machine.start(running.id, in: "task")
    #expect(machine.wait(for: pending, "waiter") == nil)
    #expect(machine.abandon(pending.id).all == ["waiter"])
    #expect(pending.isCancelled && pending.isFinished)
    #expect(machine.abandon(running.id).isEmpty)
    #expect(!running.isFinished)
  }

  @Test func finishingAnUnknownOrFinishedUnitDoesNothing() {
    var machine = Machine()
    let unit = EffectToken(lifetime: nil)
    guard case .finished(let none) = machine.finish(unit.id) else { return }
    #expect(none.isEmpty)
    #expect(machine.unpin([unit.id]).isEmpty)
    #expect(machine.parkFinishing(unit.id, waiter: "w") == "w")
  }

  @Test func idleWaitersWaitForTheLastUnit() {
    var machine = Machine()
    let empty = machine.makeIdleTicket()
    #expect(machine.waitUntilIdle("now", ticket: empty, cancelled: false) == "now")
    let unit = EffectToken(lifetime: nil)
    machine.register(unit, keys: [])
    let ticket = machine.makeIdleTicket()
    #expect(machine.waitUntilIdle("later", ticket: ticket, cancelled: false) == nil)
    let abandoned = machine.makeIdleTicket()
    #expect(machine.waitUntilIdle("gone", ticket: abandoned, cancelled: false) == nil)
    #expect(machine.abandonIdleWait(ticket: abandoned) == "gone")
    #expect(machine.abandonIdleWait(ticket: abandoned) == nil)
    let cancelled = machine.makeIdleTicket()
    #expect(machine.waitUntilIdle("cancelled", ticket: cancelled, cancelled: true) == "cancelled")
    _ = machine.start(unit.id, in: "task")
    guard case .finished(let resumptions) = machine.finish(unit.id) else { return }
    #expect(resumptions.all == ["later"])
  }

  @Test func originsAreListedInSendOrderWhileTheirLifetimesLive() {
    var machine = Machine()
    let late = EffectToken(lifetime: nil)
    let early = EffectToken(lifetime: nil)
    machine.register(late, keys: [])
    machine.register(early, keys: [])
    machine.setOrigin(Self.origin(2, ".late"), of: late)
    machine.setOrigin(Self.origin(1, ".early"), of: early)
    machine.setOrigin(Self.origin(3, ".unknown"), of: EffectToken(lifetime: nil))
    #expect(machine.unfinishedOrigins.map(\.action) == [".early", ".late"])
    _ = machine.start(early.id, in: "task")
    _ = machine.finish(early.id)
    #expect(machine.unfinishedOrigins.map(\.action) == [".late"])
  }

  @Test func equalIdentifiersInDifferentScopesAreDifferentKeys() {
    let row1 = CancelScope(element: CancelKey(1, scope: nil))
    let row2 = CancelScope(element: CancelKey(2, scope: nil))
    #expect(CancelKey("timer", scope: row1) != CancelKey("timer", scope: row2))
    #expect(
      CancelKey("timer", scope: row1)
        == CancelKey("timer", scope: CancelScope(element: CancelKey(1, scope: nil)))
    )
    #expect(CancelKey("timer", scope: nil) != CancelKey("timer", scope: row1))
  }

  private static func origin(_ sequence: Int, _ action: String) -> EffectOrigin {
    // NB: a `String` action is described as itself.
    EffectOrigin(
      sequence: sequence,
      action: action,
      location: SourceLocation(fileID: "", filePath: "", line: 0, column: 0)
    )
  }
}

// The machine's tests stand for task handles with strings and numbers.
extension String: UnitSlot {
  init(unitSlotBits bits: UInt) {
    self = "task \(bits)"
  }
}

extension Int: UnitSlot {
  init(unitSlotBits bits: UInt) {
    self = Int(bitPattern: bits)
  }
}

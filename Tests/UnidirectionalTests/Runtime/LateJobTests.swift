import Testing

@testable import Unidirectional

/// Jobs handed to a supervisor after its store shut down (a shutdown racing a reducer's return)
/// are abandoned: their units end without running, and their queue places are given up.
@Suite(.timeLimit(.minutes(1))) struct LateJobTests {
  @Test func jobsSubmittedAfterShutdownNeverRunAndGiveUpTheirQueuePlaces() async {
    let supervisor = EffectSupervisor(executorPreference: nil, reporter: .default)
    let ran = LockIsolated(false)
    let recorder = Recorder()
    let delivery = EffectDelivery(receiver: recorder)
    var planner = EffectPlanner<Int>()
    let effect = Effect<Int>.merge(
      .run { _ in ran.setValue(true) },
      .concatenate(.send(1), .run { _ in ran.setValue(true) }).queued(id: "replies"),
      .send(2).cancellable(id: "late")
    )
    planner.plan(effect, delivery: delivery, supervisor: supervisor) { _, _ in }
    #expect(supervisor.queueCount == 1)
    supervisor.shutDown()
    supervisor.apply(&planner.steps, jobs: &planner.jobs)
    await supervisor.waitUntilEnded()
    #expect(!ran.value)
    #expect(await recorder.received.isEmpty)
    #expect(supervisor.liveCount == 0)
    #expect(supervisor.queueCount == 0)
    #expect(supervisor.isShutDown)
  }

  @Test func cancellingByIdentifierThroughTheSupervisorFinishesPendingUnits() async {
    let supervisor = EffectSupervisor(executorPreference: nil, reporter: .default)
    let delivery = EffectDelivery(receiver: Recorder())
    var planner = EffectPlanner<Int>()
    let effect = Effect<Int>.run { _ in await untilCancelled() }
      .cancellable(id: "sleep")
    planner.plan(effect, delivery: delivery, supervisor: supervisor) { _, _ in }
    supervisor.applySteps(&planner.steps)
    #expect(supervisor.liveCount == 1)
    supervisor.cancel([CancelKey("sleep", scope: nil)])
    #expect(supervisor.liveCount == 0)
    supervisor.apply(&planner.steps, jobs: &planner.jobs)  // its job finds nothing to run
    await supervisor.waitUntilEnded()
  }
}

/// Records the actions effects deliver.
private actor Recorder: EffectReceiver {
  var received: [Int] = []

  func receive(_ action: Int, from unit: any EffectUnit) {
    self.received.append(action)
  }
}

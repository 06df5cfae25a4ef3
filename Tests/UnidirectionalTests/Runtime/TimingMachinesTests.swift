import Testing

@testable import Unidirectional

/// The per-concern machines the supervisor's lock guards with the effect state machine: their
/// transitions, and the invalid ones, which trap.
@Suite struct TimingMachinesTests {
  let key = CancelKey("debounced", scope: nil)

  @Test func aDebounceTimerFiresItsLatestBodyOnceAndEndsOnlyItsOwnSlot() {
    var timers = DebounceTimers()
    let rearmed1 = timers.rearm(self.key, deadline: 1, body: "none yet")
    #expect(!rearmed1)
    let first = timers.arm(self.key, deadline: 1, body: "first")
    let rearmed2 = timers.rearm(self.key, deadline: 2, body: "second")
    #expect(rearmed2)
    // Woke at its first deadline: re-armed meanwhile, it sleeps again.
    guard
      case .sleep(let until) = timers.wake(
        self.key,
        generation: first,
        sleptUntil: { $0 as? Int == 1 }
      )
    else { Issue.record("expected to sleep again"); return }
    #expect(until as? Int == 2)
    guard
      case .fire(let body) = timers.wake(
        self.key,
        generation: first,
        sleptUntil: { $0 as? Int == 2 }
      )
    else { Issue.record("expected to fire"); return }
    #expect(body as? String == "second")
    // Fired: it takes no new deadline, and a newer timer replaces it.
    let rearmed3 = timers.rearm(self.key, deadline: 3, body: "third")
    #expect(!rearmed3)
    let second = timers.arm(self.key, deadline: 3, body: "third")
    timers.end(self.key, generation: first)
    #expect(timers.count == 1)
    timers.end(self.key, generation: second)
    #expect(timers.isEmpty)
  }

  @Test func aCancelledDebounceTimerTakesNoNewDeadline() {
    var timers = DebounceTimers()
    _ = timers.arm(self.key, deadline: 1, body: "first")
    timers.stopRearming([self.key])
    let rearmed4 = timers.rearm(self.key, deadline: 2, body: "second")
    #expect(!rearmed4)
    timers.cancel(self.key)
    #expect(timers.isEmpty)
  }

  @Test func endingADebounceTimerThatWasNeverArmedIsAProgrammingError() async {
    await #expect(processExitsWith: .failure) {
      var timers = DebounceTimers()
      timers.end(CancelKey("never", scope: nil), generation: 0)
    }
  }

  @Test func waitingTwiceForOneQueuePlaceIsAProgrammingError() async {
    await #expect(processExitsWith: .failure) {
      var queues = OrderedQueues<String>()
      _ = queues.enqueue(on: CancelKey("queue", scope: nil))
      let second = queues.enqueue(on: CancelKey("queue", scope: nil))
      _ = queues.waitForTurn(second, "once")
      _ = queues.waitForTurn(second, "twice")
    }
  }

  @Test func waitingForAPlaceNeverTakenIsAProgrammingError() async {
    await #expect(processExitsWith: .failure) {
      var queues = OrderedQueues<String>()
      _ = queues.enqueue(on: CancelKey("queue", scope: nil))
      _ = queues.waitForTurn(QueueTicket(key: CancelKey("queue", scope: nil), number: 5), "stray")
    }
  }

  @Test func throttleEntriesPastTheSweepThresholdKeepOnlyLiveOnes() {
    var throttles = ThrottleTable()
    for index in 0...ThrottleTable.minimumSweep {
      throttles.withState(for: CancelKey(index, scope: nil)) { $0.isHolding = false }
    }
    // Entries with no clock have expired: the sweep past the threshold drops them all.
    #expect(throttles.count == 0)
  }
}

import Testing

@testable import Unidirectional

/// `clock.timer(interval:)` on a clock whose timers the runtime queues: each wait is a record in
/// the clock's queue (``QueuedWait``), driven here by a host the test fires by hand.
@Suite(.timeLimit(.minutes(2))) struct QueuedTimerTests {
  /// A timer host whose time moves only when the test says, firing what is due in order.
  private final class ManualHost: TimerHost, Sendable {
    private struct State: Sendable {
      var queue = TimerQueue()
      var now = Duration.zero
      var armed: [ObjectIdentifier] = []
      var disarmed = 0
      var armWaiters: [(count: Int, continuation: UnsafeContinuation<Void, Never>)] = []
    }

    // NB: `LockedBox`, not `Mutex`: ThreadSanitizer sees its pthread mutex.
    private let state = LockedBox(State())

    var hostClock: any Clock<Duration> { ContinuousClock() }
    var queuesTimers: Bool { true }
    var nowOffset: Duration { self.state.withLock { $0.now } }
    var nowNanoseconds: Int64 { self.nowOffset.nanoseconds }

    /// The identities of the records armed so far, in order.
    var armed: [ObjectIdentifier] { self.state.withLock { $0.armed } }
    var disarmed: Int { self.state.withLock { $0.disarmed } }
    var queued: Int { self.state.withLock { $0.queue.count } }
    var nextDeadline: Duration? { self.state.withLock { $0.queue.nextDeadline } }

    func arm(_ entry: TimerEntry) {
      let ready = self.state.withLock { state -> [UnsafeContinuation<Void, Never>] in
        guard !entry.isCancelled else { return [] }
        state.queue.insert(entry)
        state.armed.append(ObjectIdentifier(entry))
        let count = state.armed.count
        let ready = state.armWaiters.filter { $0.count <= count }.map(\.continuation)
        state.armWaiters.removeAll { $0.count <= count }
        return ready
      }
      for continuation in ready { continuation.resume() }
    }

    func disarm(_ entry: TimerEntry) {
      self.state.withLock { state in
        if state.queue.remove(entry) { state.disarmed += 1 }
      }
    }

    func rearm(_ entry: TimerEntry, deadline: Duration, update: (TimerEntry) -> Bool) -> Bool {
      false
    }

    /// Returns once `count` records have been armed in all.
    func waitUntilArmed(_ count: Int) async {
      await withUnsafeContinuation { continuation in
        let now = self.state.withLock { state -> Bool in
          if state.armed.count >= count { return true }
          state.armWaiters.append((count, continuation))
          return false
        }
        if now { continuation.resume() }
      }
    }

    /// Moves the time to `offset` and fires every record due by then, in order.
    func advance(to offset: Duration) async {
      var due: [TimerEntry] = []
      self.state.withLock { state in
        state.now = offset
        state.queue.popDue(by: offset, into: &due)
      }
      for entry in due { await entry.fire(on: self) }
    }
  }

  @Test func ticksComeAtEachDeadlineWithoutDriftOneRecordForEveryTick() async {
    let host = ManualHost()
    let ticks = LockIsolated<[Duration]>([])
    let task = Task {
      for await elapsed in ClockTimer(makeDriver: {
        QueuedTimerDriver(host: host, interval: .seconds(1))
      }) {
        ticks.withValue { $0.append(elapsed) }
      }
    }
    await host.waitUntilArmed(1)
    #expect(host.nextDeadline == .seconds(1))
    #expect(ticks.value.isEmpty)

    await host.advance(to: .seconds(1))
    await host.waitUntilArmed(2)
    #expect(ticks.value == [.seconds(1)])
    #expect(host.nextDeadline == .seconds(2))

    // Late: the tick due at 2 s fires at 3.5 s; the one due at 3 s is already due when the loop
    // asks for it, and still waits in the queue (which fires it at its next look); the next is
    // due at 4 s, not 4.5 s.
    await host.advance(to: .milliseconds(3_500))
    await host.waitUntilArmed(3)
    #expect(ticks.value == [.seconds(1), .seconds(2)])
    #expect(host.nextDeadline == .seconds(3))
    await host.advance(to: .milliseconds(3_500))
    await host.waitUntilArmed(4)
    #expect(ticks.value == [.seconds(1), .seconds(2), .seconds(3)])
    #expect(host.nextDeadline == .seconds(4))
    #expect(Set(host.armed).count == 1)

    task.cancel()
    await task.value
    #expect(host.queued == 0)
    #expect(host.disarmed == 1)
    #expect(ticks.value == [.seconds(1), .seconds(2), .seconds(3)])
  }

  @Test func cancellingAWaitingTimerTakesItsRecordOutAndEndsTheLoop() async {
    let host = ManualHost()
    let ended = LockIsolated(false)
    let task = Task {
      for await _ in ClockTimer(makeDriver: {
        QueuedTimerDriver(host: host, interval: .seconds(3_600))
      }) {
        Issue.record("A cancelled timer ticked.")
      }
      ended.setValue(true)
    }
    await host.waitUntilArmed(1)
    #expect(host.queued == 1)
    task.cancel()
    await task.value
    #expect(ended.value)
    #expect(host.queued == 0)
    #expect(host.disarmed == 1)
    // A firing that comes after the cancellation resumes nothing.
    await host.advance(to: .seconds(7_200))
    #expect(host.armed.count == 1)
  }

  @Test func aTaskCancelledBeforeItWaitsQueuesNothing() async {
    let host = ManualHost()
    let wait = QueuedWait(host: host)
    let task = Task {
      withUnsafeCurrentTask { $0?.cancel() }
      return await wait.wait(until: .seconds(1))
    }
    #expect(await task.value == false)
    #expect(host.armed.isEmpty)
    // Cancelled, the record is spent: it does not wait again.
    #expect(await wait.wait(until: .seconds(2)) == false)
    #expect(host.armed.isEmpty)
  }

  @Test func aFiringAndACancellationRacingResumeTheWaitOnceAndLeaveNothingQueued() async {
    var outcomes: [Bool: Int] = [:]
    for round in 0..<500 {
      let host = ManualHost()
      let wait = QueuedWait(host: host)
      let waiter = Task { await wait.wait(until: .seconds(1)) }
      await host.waitUntilArmed(1)
      async let fired: Void = host.advance(to: .seconds(1))
      async let cancelled: Void = { waiter.cancel() }()
      _ = await (fired, cancelled)
      let result = await waiter.value
      outcomes[result, default: 0] += 1
      #expect(host.queued == 0, "round \(round)")
      #expect(host.disarmed <= 1, "round \(round)")
      // Fired first: nothing was left to disarm. Cancelled first: the record was taken out,
      // unless the firing had already popped it.
      if result { #expect(host.disarmed == 0, "round \(round)") }
    }
    #expect(outcomes.values.reduce(0, +) == 500)
  }

  @Test func aContinuousClockTimerTicksOnTheRealClock() async {
    let clock = ContinuousClock()
    let start = clock.now
    var ticks: [Duration] = []
    for await elapsed in clock.timer(interval: .milliseconds(1)) {
      ticks.append(elapsed)
      if ticks.count == 3 { break }
    }
    #expect(ticks == [.milliseconds(1), .milliseconds(2), .milliseconds(3)])
    #expect(start.duration(to: clock.now) >= .milliseconds(3))
  }

  @Test func aStoreWhoseEffectWaitsOnAnHourLongTimerShutsDownAtOnce() async {
    let ticks = LockIsolated(0)
    let looping = Latch()
    let store = Store(initialState: 0) {
      Reduce<Int, Bool> { _, start in
        guard start else { return .none }
        return .run { _ in
          looping.open()
          for await _ in SuspendingClock().timer(interval: .seconds(3_600)) {
            ticks.withValue { $0 += 1 }
          }
        }
      }
    }
    let task = await store.send(true)
    await looping.wait()
    // Without a cancellation that resumes the wait, this would take an hour (the time limit).
    await store.shutdown(gracePeriod: .zero)
    await task.finish()
    #expect(ticks.value == 0)
  }
}

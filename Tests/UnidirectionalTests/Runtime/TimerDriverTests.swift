import Testing

@testable import Unidirectional

/// The task that drives a clock's timer queue: how long it sleeps, and what happens to a driver a
/// newer one replaces.
@Suite(.timeLimit(.minutes(1))) struct TimerDriverTests {
  /// An armed timer that never fires in these tests.
  // Safety: no fields of its own; `TimerEntry`'s are guarded by its host's lock.
  private final class Entry: TimerEntry, @unchecked Sendable {
    init(on host: any TimerHost, at deadline: Duration) {
      super.init(lifetime: nil, host: host, deadline: deadline)
    }
  }

  /// A service on a recording clock with an idle timer 300 s away armed, once its driver sleeps.
  private static func armingAnIdleTimer() async -> (
    clock: RecordingClock,
    service: TimerService<RecordingClock>,
    events: AsyncStream<RecordingClock.Event>.Iterator,
    idle: Entry
  ) {
    let clock = RecordingClock()
    let service = TimerService(clock: clock)
    var events = clock.events.makeAsyncIterator()
    let idle = Entry(on: service, at: .seconds(300))
    service.arm(idle)
    // A driver looks at the queue at least once a second, however far its next deadline.
    #expect(await events.next() == .slept(until: .seconds(1)))
    return (clock, service, events, idle)
  }

  @Test func aReplacedDriverIsCancelledAtOnceNotLeftAsleepUntilItsDeadline() async throws {
    var (clock, service, events, idle) = await Self.armingAnIdleTimer()

    // Armed earlier than that wake, a timer starts a new driver, and the one it replaces stops
    // sleeping before `arm` returns: left asleep, it held ~2.2 KB until its deadline.
    let debounce = Entry(on: service, at: .milliseconds(500))
    service.arm(debounce)
    try #require(clock.cancellations == [.seconds(1)])
    #expect(await events.next() == .cancelled(until: .seconds(1)))
    #expect(await events.next() == .slept(until: .milliseconds(500)))

    service.disarm(idle)
    service.disarm(debounce)
    clock.wakeAll()  // the driver finds the queue empty and ends
  }

  @Test func aDriverWhoseNextDeadlineIsFarWakesEverySecondAndSleepsAgain() async {
    var (clock, service, events, idle) = await Self.armingAnIdleTimer()
    clock.wakeAll()  // the clock's time stands still: a second later, on the driver's timeline
    #expect(await events.next() == .slept(until: .seconds(1)))
    service.disarm(idle)
    clock.wakeAll()
  }
}

/// A clock whose time stands still: each sleeper waits until the test wakes it or its task is
/// cancelled, and every sleep and cancellation is recorded, in order.
private final class RecordingClock: Clock, Sendable {
  typealias Instant = TestClock.Instant

  enum Event: Equatable, Sendable {
    case slept(until: Duration)
    case cancelled(until: Duration)
  }

  private struct Sleepers: Sendable {
    var next = 0
    var waiting: [Int: UnsafeContinuation<Void, any Error>] = [:]
    var cancelled: Set<Int> = []
    var cancelledDeadlines: [Duration] = []
  }

  let events: AsyncStream<Event>
  private let record: AsyncStream<Event>.Continuation
  private let sleepers = LockedBox(Sleepers())

  init() {
    (self.events, self.record) = AsyncStream.makeStream(of: Event.self)
  }

  var now: Instant { Instant() }

  var minimumResolution: Duration { .zero }

  func sleep(until deadline: Instant, tolerance: Duration? = nil) async throws {
    let id = self.sleepers.withLock { sleepers in
      defer { sleepers.next += 1 }
      return sleepers.next
    }
    try await withTaskCancellationHandler {
      try await withUnsafeThrowingContinuation { continuation in
        let cancelled = self.sleepers.withLock { sleepers in
          if sleepers.cancelled.contains(id) { return true }
          sleepers.waiting[id] = continuation
          return false
        }
        if cancelled {
          continuation.resume(throwing: CancellationError())
        } else {
          self.record.yield(.slept(until: deadline.offset))
        }
      }
    } onCancel: {
      let continuation = self.sleepers.withLock { sleepers in
        sleepers.cancelled.insert(id)
        sleepers.cancelledDeadlines.append(deadline.offset)
        return sleepers.waiting.removeValue(forKey: id)
      }
      self.record.yield(.cancelled(until: deadline.offset))
      continuation?.resume(throwing: CancellationError())
    }
  }

  /// The deadlines of the sleeps cancelled so far, in order (recorded as each is cancelled).
  var cancellations: [Duration] {
    self.sleepers.withLock { $0.cancelledDeadlines }
  }

  /// Wakes every sleeper as if its deadline had come.
  func wakeAll() {
    let waiting = self.sleepers.withLock { sleepers in
      defer { sleepers.waiting = [:] }
      return sleepers.waiting
    }
    for continuation in waiting.values { continuation.resume() }
  }
}

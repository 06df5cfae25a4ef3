import Synchronization
import Testing

@testable import Unidirectional

/// The lease watcher's sleep: a deadline counted from before its length was computed, so a clock
/// that moves meanwhile cannot push the wake past the time it was for.
@Suite struct DeadlineSleepTests {
  @Test func theDeadlineIsCountedFromAnInstantReadBeforeTheWait() async throws {
    let clock = MovingClock()
    // The wait reads the clock, as the watcher's reads the lease timeline: the clock has moved by
    // then, as when a test advances it or the process pauses between the two.
    try await sleep(on: clock) {
      _ = clock.now
      return 5_000_000_000
    }
    // Read at 0 s before the wait, the deadline is 5 s; a sleep `for` the length, counted from a
    // read after the wait, would end at 6 s.
    #expect(clock.deadlines == [MovingClock.Instant(offset: .seconds(5))])
  }

  @Test func aWaitOfNothingOrLessDoesNotSleep() async throws {
    let clock = MovingClock()
    try await sleep(on: clock) { 0 }
    try await sleep(on: clock) { -1 }
    #expect(clock.deadlines.isEmpty)
  }
}

/// A clock whose time moves on by a second each time it is read, and whose sleeps only record
/// their deadline and return.
private final class MovingClock: Clock {
  struct Instant: InstantProtocol {
    var offset: Duration

    func advanced(by duration: Duration) -> Self { Self(offset: self.offset + duration) }
    func duration(to other: Self) -> Duration { other.offset - self.offset }
    static func < (left: Self, right: Self) -> Bool { left.offset < right.offset }
  }

  private let state = Mutex((reads: 0, deadlines: [Instant]()))

  var now: Instant {
    self.state.withLock { state in
      defer { state.reads += 1 }
      return Instant(offset: .seconds(state.reads))
    }
  }

  var minimumResolution: Duration { .nanoseconds(1) }

  var deadlines: [Instant] { self.state.withLock { $0.deadlines } }

  func sleep(until deadline: Instant, tolerance: Duration?) async throws {
    self.state.withLock { $0.deadlines.append(deadline) }
  }
}

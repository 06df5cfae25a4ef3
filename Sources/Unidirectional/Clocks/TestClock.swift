/// A clock whose time moves only when a test advances it.
///
/// ```swift
/// let clock = TestClock()
/// let store = TestStore(initialState: Counter.State()) { Counter(clock: clock) }
/// await store.send(.startTimerTapped) { $0.isTimerRunning = true }
/// await clock.advance(by: .seconds(1))
/// await store.receive(.timerTick) { $0.count = 1 }
/// ```
///
/// - ``now`` starts at zero.
/// - A sleep suspends until the clock is advanced to its deadline. Sleeping until a deadline that
///   has already passed returns immediately; sleeping until exactly ``now`` (`sleep(for: .zero)`)
///   waits for the next advance, even `advance()` by zero, as in swift-clocks.
/// - ``advance(by:)`` wakes the sleepers due in the span in deadline order, ties in the order
///   they slept. While a sleeper runs, ``now`` reads its deadline. A sleep scheduled by woken
///   code that falls inside the span also wakes within the same advance, at its own deadline.
/// - A cancelled sleeper is removed at once and its sleep throws `CancellationError`.
///
/// **Determinism.** Under a test store, or inside `withTestExecution` (module
/// `UnidirectionalTesting`), the woken code runs on a hand-drained executor: `advance` resumes
/// one sleeper, lets that executor run until everything that can make progress has suspended
/// again, and only then moves to the next deadline, so it returns with all the work of the span
/// done. Used in plain async code with neither, `advance` resumes the due sleepers in deadline
/// order but cannot know when the resumed tasks have run; a sleep those tasks schedule later is
/// only seen by the next advance.
///
/// Thread safety: all of its state is guarded by one lock, so tasks on any executor can share
/// one clock.
public final class TestClock: Clock, Sendable {
  /// A point in time on a ``TestClock``: the offset from its start.
  public struct Instant: InstantProtocol, Hashable, Sendable {
    /// The time since the clock's start.
    public var offset: Duration

    /// Creates an instant at `offset` from the clock's start.
    public init(offset: Duration = .zero) {
      self.offset = offset
    }

    /// The instant `duration` later.
    public func advanced(by duration: Duration) -> Self {
      Self(offset: self.offset + duration)
    }

    /// The time from this instant to `other`.
    public func duration(to other: Self) -> Duration {
      other.offset - self.offset
    }

    /// Orders instants by offset.
    public static func < (lhs: Self, rhs: Self) -> Bool {
      lhs.offset < rhs.offset
    }
  }

  /// Everything the clock knows, behind one lock.
  fileprivate struct Timeline: Sendable {
    var now: Instant
    var nextSequence = 0
    var sleepers: [Int: Sleeper] = [:]
    var queue = SleeperHeap()
    /// Sleeps between taking a sequence number and registering; `true` once cancelled.
    var registering: [Int: Bool] = [:]

    /// Drops heap entries of cancelled sleepers.
    mutating func dropStale() {
      while let first = self.queue.peek(), self.sleepers[first.sequence] == nil {
        self.queue.pop()
      }
    }
  }

  fileprivate struct Sleeper: Sendable {
    var deadline: Instant
    var wake: Wake
  }

  /// What waking a sleeper does.
  fileprivate enum Wake: Sendable {
    /// Resumes a sleeping task, then settles the executor it runs on.
    case task(UnsafeContinuation<Void, any Error>, drainer: (any ManualDrainer)?)
    /// Fires an armed timer (``Effect/send(_:after:clock:)``).
    case timer(TimerEntry)
  }

  private let timeline: LockedBox<Timeline>

  /// Creates a clock whose `now` starts at `now` (zero by default).
  public init(now: Instant = Instant()) {
    self.timeline = LockedBox(Timeline(now: now))
  }

  /// The current instant.
  public var now: Instant {
    self.timeline.withLock { $0.now }
  }

  /// The clock has no resolution limit.
  public var minimumResolution: Duration {
    .zero
  }

  /// The number of tasks sleeping on this clock, and of timers armed on it
  /// (``Effect/send(_:after:clock:)``).
  public var sleeperCount: Int {
    self.timeline.withLock { $0.sleepers.count }
  }

  /// Suspends until the clock is advanced to `deadline`; returns at once if it has passed.
  ///
  /// - Throws: `CancellationError` when the task is cancelled before or while sleeping.
  public func sleep(until deadline: Instant, tolerance: Duration? = nil) async throws {
    try Task.checkCancellation()
    let drainer = TestExecution.drainer
    let sequence = self.timeline.withLock { timeline -> Int in
      defer { timeline.nextSequence += 1 }
      timeline.registering[timeline.nextSequence] = false
      return timeline.nextSequence
    }
    try await withTaskCancellationHandler {
      try await withUnsafeThrowingContinuation {
        (continuation: UnsafeContinuation<Void, any Error>) in
        let outcome = self.timeline.withLock { timeline -> Result<Void, CancellationError>? in
          let cancelled = timeline.registering.removeValue(forKey: sequence) ?? false
          if cancelled { return .failure(CancellationError()) }
          // NB: a deadline already passed is due now; one exactly now waits for the next
          // advance (even by zero), as in swift-clocks.
          if deadline < timeline.now { return .success(()) }
          timeline.sleepers[sequence] = Sleeper(
            deadline: deadline,
            wake: .task(continuation, drainer: drainer)
          )
          timeline.queue.push(deadline: deadline.offset, sequence: sequence)
          return nil
        }
        if let outcome { continuation.resume(with: outcome) }
      }
    } onCancel: {
      let sleeper = self.timeline.withLock { timeline -> Sleeper? in
        if let sleeper = timeline.sleepers.removeValue(forKey: sequence) { return sleeper }
        if timeline.registering[sequence] != nil {
          timeline.registering[sequence] = true
        }
        return nil
      }
      if case .task(let continuation, _) = sleeper?.wake {
        continuation.resume(throwing: CancellationError())
      }
    }
  }

  /// Moves time forward by `duration`, waking every sleeper due in the span in order.
  public func advance(by duration: Duration = .zero) async {
    let target = self.timeline.withLock { $0.now.advanced(by: duration) }
    await self.advance(to: target)
  }

  /// Moves time forward to `deadline`, waking every sleeper due by then in order.
  ///
  /// Moving to an instant before ``now`` wakes nothing and leaves the clock where it is.
  public func advance(to deadline: Instant) async {
    // Work the caller started (in `withTestExecution`) first reaches its sleeps.
    await TestExecution.drainer?.settle()
    while let sleeper = self.popSleeper(dueBy: deadline) {
      switch sleeper.wake {
      case .task(let continuation, let drainer):
        continuation.resume()
        await drainer?.settle()
      case .timer(let timer):
        await timer.fire(on: self)
        await timer.drainer?.settle()
      }
    }
    self.timeline.withLock { timeline in
      if timeline.now < deadline { timeline.now = deadline }
    }
  }

  /// Advances to each next deadline until no task is sleeping.
  ///
  /// - Parameters:
  ///   - maximumSteps: How many deadlines to advance through before giving up; a timer
  ///     that never stops would otherwise make this loop forever. Reaching the bound reports an
  ///     issue.
  ///   - fileID: The file ID of the location issues are reported at (the caller's).
  ///   - filePath: The file path of that source location.
  ///   - line: The line of that source location.
  ///   - column: The column of that source location.
  public func run(
    maximumSteps: Int = 10_000,
    fileID: StaticString = #fileID,
    filePath: StaticString = #filePath,
    line: UInt = #line,
    column: UInt = #column
  ) async {
    for _ in 0..<maximumSteps {
      // Work the caller started (in `withTestExecution`) first reaches its sleeps.
      await TestExecution.drainer?.settle()
      guard let next = self.nextDeadline() else { return }
      await self.advance(to: next)
    }
    guard self.nextDeadline() != nil else { return }
    reportIssue(
      """
      'TestClock.run()' stopped after \(maximumSteps) deadlines with tasks still sleeping.

        Sleeping tasks: \(self.sleeperCount)
        Now: \(self.now.offset)

      Something keeps scheduling sleeps, such as a timer that is never stopped. Cancel it, or \
      advance by a fixed duration with 'advance(by:)'.
      """,
      fileID: "\(fileID)",
      filePath: "\(filePath)",
      line: Int(line),
      column: Int(column)
    )
  }

  /// Throws ``SuspensionError`` if a task is sleeping on this clock: a check that a flow has
  /// nothing scheduled left (after settling the work the caller started, in
  /// `withTestExecution`).
  ///
  /// ```swift
  /// await clock.advance(by: .seconds(1))
  /// try await clock.checkSuspension()   // every sleep has been woken
  /// ```
  public func checkSuspension() async throws {
    await TestExecution.drainer?.settle()
    let count = self.sleeperCount
    if count > 0 { throw SuspensionError(sleeperCount: count) }
  }

  // MARK: - Private

  private func nextDeadline() -> Instant? {
    self.timeline.withLock { timeline in
      timeline.dropStale()
      return timeline.queue.peek().map { Instant(offset: $0.deadline) }
    }
  }

  /// Removes the earliest sleeper due by `deadline` and moves `now` to its deadline.
  private func popSleeper(dueBy deadline: Instant) -> Sleeper? {
    self.timeline.withLock { timeline in
      timeline.dropStale()
      guard let first = timeline.queue.peek(), first.deadline <= deadline.offset else {
        return nil
      }
      timeline.queue.pop()
      guard let sleeper = timeline.sleepers.removeValue(forKey: first.sequence) else {
        return nil
      }
      if timeline.now < sleeper.deadline { timeline.now = sleeper.deadline }
      return sleeper
    }
  }
}

// MARK: - Timers

extension TestClock: TimerHost {
  @usableFromInline var hostClock: any Clock<Duration> { self }

  @usableFromInline var queuesTimers: Bool { true }

  @usableFromInline var nowOffset: Duration {
    self.now.offset
  }

  @usableFromInline var nowNanoseconds: Int64 {
    self.now.offset.nanoseconds
  }

  /// Queues a timer as a sleeper.
  ///
  /// It wakes in deadline order with the sleeping tasks, ties in the order they slept or were
  /// armed. A deadline at or before ``now`` fires at the next advance.
  @usableFromInline func arm(_ entry: TimerEntry) {
    self.timeline.withLock { timeline in
      guard !entry.isCancelled else { return }
      timeline.arm(entry)
    }
  }

  @usableFromInline func disarm(_ entry: TimerEntry) {
    self.timeline.withLock { timeline in
      guard timeline.isArmed(entry) else { return }
      timeline.sleepers.removeValue(forKey: Int(entry.sequence))
    }
  }

  /// Moves an armed timer to `deadline` as if armed anew: it wakes after every sleeper with that
  /// deadline that slept or was armed before.
  @usableFromInline func rearm(
    _ entry: TimerEntry,
    deadline: Duration,
    update: (TimerEntry) -> Bool
  ) -> Bool {
    self.timeline.withLock { timeline in
      guard !entry.isCancelled, timeline.isArmed(entry), update(entry) else { return false }
      // NB: the old heap entry goes stale (its sleeper is gone) and is dropped when it surfaces.
      timeline.sleepers.removeValue(forKey: Int(entry.sequence))
      entry.deadline = deadline
      timeline.arm(entry)
      return true
    }
  }
}

extension TestClock.Timeline {
  /// Whether `entry` is armed and has not fired.
  fileprivate func isArmed(_ entry: TimerEntry) -> Bool {
    guard case .timer(let armed) = self.sleepers[Int(entry.sequence)]?.wake else { return false }
    return armed === entry
  }

  /// Queues `entry` for its deadline, behind every sleeper queued before it.
  fileprivate mutating func arm(_ entry: TimerEntry) {
    let sequence = self.nextSequence
    self.nextSequence += 1
    entry.sequence = UInt64(sequence)
    let deadline = TestClock.Instant(offset: entry.deadline)
    self.sleepers[sequence] = TestClock.Sleeper(deadline: deadline, wake: .timer(entry))
    self.queue.push(deadline: max(deadline, self.now).offset, sequence: sequence)
  }
}

/// A binary min-heap of (deadline, sequence): deadline order, ties in the order they slept.
struct SleeperHeap: Sendable {
  struct Entry: Sendable {
    var deadline: Duration
    var sequence: Int

    static func < (lhs: Self, rhs: Self) -> Bool {
      (lhs.deadline, lhs.sequence) < (rhs.deadline, rhs.sequence)
    }
  }

  private var entries: [Entry] = []

  var isEmpty: Bool { self.entries.isEmpty }

  func peek() -> Entry? { self.entries.first }

  mutating func push(deadline: Duration, sequence: Int) {
    self.entries.append(Entry(deadline: deadline, sequence: sequence))
    var child = self.entries.count - 1
    while child > 0 {
      let parent = (child - 1) / 2
      guard self.entries[child] < self.entries[parent] else { break }
      self.entries.swapAt(child, parent)
      child = parent
    }
  }

  @discardableResult
  mutating func pop() -> Entry? {
    guard !self.entries.isEmpty else { return nil }
    self.entries.swapAt(0, self.entries.count - 1)
    let first = self.entries.removeLast()
    var parent = 0
    while true {
      let left = 2 * parent + 1
      let right = left + 1
      var smallest = parent
      if left < self.entries.count, self.entries[left] < self.entries[smallest] { smallest = left }
      if right < self.entries.count, self.entries[right] < self.entries[smallest] {
        smallest = right
      }
      guard smallest != parent else { break }
      self.entries.swapAt(parent, smallest)
      parent = smallest
    }
    return first
  }
}

/// Thrown by ``TestClock/checkSuspension()`` when tasks are still sleeping.
public struct SuspensionError: Error, CustomStringConvertible {
  /// How many tasks were sleeping.
  public var sleeperCount: Int

  /// How many tasks were still sleeping.
  public var description: String {
    "\(self.sleeperCount == 1 ? "1 task is" : "\(self.sleeperCount) tasks are") still sleeping on the test clock"
  }
}

/// A clock whose sleeps return at once, moving `now` forward by the slept amount.
///
/// Use it where a feature waits but the test (or a preview, or a dry run) does not care about
/// the waiting: debounces, retries with back-off, animations of a CLI spinner.
///
/// ```swift
/// let store = Store(initialState: Feature.State()) {
///   Feature()
/// } withDependencies: {
///   $0.continuousClock = ImmediateClock()
/// }
/// ```
///
/// Sleeping never suspends, never yields and allocates nothing. Cancellation is still honoured:
/// sleeping in a cancelled task throws `CancellationError`.
public final class ImmediateClock: Clock, Sendable {
  /// A point in time on an ``ImmediateClock``: the offset from its start.
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

  private let current: LockedBox<Instant>

  /// Creates a clock whose `now` starts at `now`.
  public init(now: Instant = Instant()) {
    self.current = LockedBox(now)
  }

  /// The current instant: the start plus every duration slept so far.
  public var now: Instant {
    self.current.withLock { $0 }
  }

  /// The clock has no resolution limit.
  public var minimumResolution: Duration {
    .zero
  }

  /// Returns at once, moving ``now`` to `deadline` if it is later.
  ///
  /// - Throws: `CancellationError` when the current task is cancelled.
  public func sleep(until deadline: Instant, tolerance: Duration? = nil) async throws {
    try Task.checkCancellation()
    self.current.withLock { now in
      if now < deadline { now = deadline }
    }
  }
}

/// A clock that reports an issue whenever it is used to wait, for proving that a flow does not
/// depend on time.
///
/// It is the test value of the built-in clock dependencies. Sleeping reports an issue naming the
/// clock and then throws `CancellationError`, so the effect that slept ends quietly; ``now``
/// works and stays at its start.
///
/// ```swift
/// let store = TestStore(initialState: Feature.State()) {
///   Feature(clock: UnimplementedClock())
/// }
/// await store.send(.tapped)   // fails if `.tapped` sleeps
/// ```
public struct UnimplementedClock: Clock, Sendable {
  /// A point in time: an ``ImmediateClock`` instant.
  public typealias Instant = ImmediateClock.Instant

  private let name: String
  private let fileID: String
  private let filePath: String
  private let line: Int
  private let column: Int

  /// Creates a clock that fails when used.
  ///
  /// - Parameters:
  ///   - name: How the report names the clock.
  ///   - fileID: The file ID of the location issues are reported at (the caller's).
  ///   - filePath: The file path of that source location.
  ///   - line: The line of that source location.
  ///   - column: The column of that source location.
  public init(
    name: String = "Clock",
    fileID: StaticString = #fileID,
    filePath: StaticString = #filePath,
    line: UInt = #line,
    column: UInt = #column
  ) {
    self.name = name
    self.fileID = "\(fileID)"
    self.filePath = "\(filePath)"
    self.line = Int(line)
    self.column = Int(column)
  }

  /// The start instant; reading it is not reported.
  public var now: Instant {
    Instant()
  }

  /// No resolution limit.
  public var minimumResolution: Duration {
    .zero
  }

  /// Reports an issue naming the call, then throws `CancellationError`.
  public func sleep(until deadline: Instant, tolerance: Duration? = nil) async throws {
    reportIssue(
      """
      An unimplemented clock was used: '\(self.name).sleep(until:)' (deadline \
      \(deadline.offset)).

      The code under test waits on this clock. Provide a 'TestClock' (to control time) or an \
      'ImmediateClock' (to skip waiting).
      """,
      fileID: self.fileID,
      filePath: self.filePath,
      line: self.line,
      column: self.column
    )
    throw CancellationError()
  }
}

public import Unidirectional

/// One client of the line server: a counter, a timer and a delayed reply, driven by text
/// commands, one reply line per command, in command order.
///
/// Commands: `inc`, `dec`, `get` (reply: the count), `start-timer`, `stop-timer`, `sleep MS`
/// (reply `slept MS` after MS milliseconds), `quit` (reply `bye`, then the server closes the
/// connection). Anything else gets one `error: ...` reply and the connection stays up. No
/// command for `idleTimeout` on the clock closes the connection.
public struct Connection: Reducer {
  /// What one connection remembers.
  public struct State: Equatable, Sendable {
    /// The counter `inc`, `dec` and `get` work on.
    public var count = 0
    /// Timer ticks since the connection opened.
    public var ticks = 0
    /// Whether `start-timer` is in force.
    public var isTimerRunning = false
    /// Whether the connection is closing: later lines are ignored.
    public var isClosed = false

    /// A new connection's state.
    public init() {}
  }

  /// What can happen to a connection.
  public enum Action: Equatable, Sendable {
    /// A line the client sent (without its newline).
    case received(String)
    /// A line longer than ``Connection/maximumLineLength`` (the server dropped it).
    case lineTooLong
    /// The timer ticked.
    case timerTick
    /// Nothing arrived for ``Connection/idleTimeout``.
    case idleTimedOut
    /// The client went away: everything it started is cancelled.
    case disconnected
  }

  /// The connection's cancellable effects: the timer, the idle timeout and `sleep` replies.
  public enum CancelID: Hashable, Sendable { case timer, idle, sleep }
  /// Every reply goes through this queue, so replies leave in command order.
  public enum QueueID: Hashable, Sendable { case replies }

  /// The longest line the server accepts, in bytes.
  public static let maximumLineLength = 64 * 1024

  /// Writes one reply line to the client.
  public let reply: @Sendable (String) async -> Void
  /// Closes the connection (after the replies queued before it).
  public let close: @Sendable () async -> Void
  /// How long the connection may stay silent before it is closed.
  public let idleTimeout: Duration
  /// The clock of the timer, `sleep` and the idle timeout.
  public let clock: any Clock<Duration>

  /// Creates the feature for one connection.
  ///
  /// - Parameters:
  ///   - idleTimeout: How long the connection may stay silent before it is closed.
  ///   - clock: The clock of the timer, `sleep` and the idle timeout.
  ///   - reply: Writes one reply line to the client.
  ///   - close: Closes the connection.
  public init(
    idleTimeout: Duration = .seconds(30),
    clock: any Clock<Duration> = ContinuousClock(),
    reply: @escaping @Sendable (String) async -> Void,
    close: @escaping @Sendable () async -> Void
  ) {
    self.idleTimeout = idleTimeout
    self.clock = clock
    self.reply = reply
    self.close = close
  }

  /// Answers one command or event.
  public func reduce(into state: inout State, action: Action) -> Effect<Action> {
    switch action {
    case .received(let line):
      guard !state.isClosed else { return .none }
      let effect = self.command(line, &state)
      // NB: a command that closed the connection (`quit`) leaves no idle timer behind.
      return state.isClosed ? effect : .merge(effect, self.restartIdleTimeout())

    case .lineTooLong:
      guard !state.isClosed else { return .none }
      return .merge(
        self.send("error: line longer than \(Self.maximumLineLength) bytes"),
        self.restartIdleTimeout()
      )

    case .timerTick:
      state.ticks += 1
      return .none

    case .idleTimedOut:
      guard !state.isClosed else { return .none }
      state.isClosed = true
      state.isTimerRunning = false
      return .merge(
        .cancel(id: CancelID.timer),
        .cancel(id: CancelID.sleep),
        self.send("error: idle for \(self.idleTimeout), closing"),
        self.closeAfterReplies()
      )

    case .disconnected:
      state.isClosed = true
      state.isTimerRunning = false
      return .merge(
        .cancel(id: CancelID.timer),
        .cancel(id: CancelID.idle),
        .cancel(id: CancelID.sleep)
      )
    }
  }

  private func command(_ line: String, _ state: inout State) -> Effect<Action> {
    let words = line.split(separator: " ", omittingEmptySubsequences: true)
    switch (words.first.map(String.init), words.count) {
    case ("inc", 1):
      state.count += 1
      return self.send("\(state.count)")
    case ("dec", 1):
      state.count -= 1
      return self.send("\(state.count)")
    case ("get", 1):
      return self.send("\(state.count)")
    case ("start-timer", 1):
      state.isTimerRunning = true
      let clock = self.clock
      return .merge(
        self.send("timer started"),
        .run { send in
          for await _ in clock.timer(interval: .seconds(1)) { await send(.timerTick) }
        }
        .cancellable(id: CancelID.timer, cancelInFlight: true)
      )
    case ("stop-timer", 1):
      state.isTimerRunning = false
      return .merge(.cancel(id: CancelID.timer), self.send("timer stopped"))
    case ("sleep", 2):
      guard let milliseconds = Int(words[1]), (0...60_000).contains(milliseconds) else {
        return self.send("error: sleep takes milliseconds from 0 to 60000")
      }
      let (clock, reply) = (self.clock, self.reply)
      return .run { _ in
        try await clock.sleep(for: .milliseconds(milliseconds))
        await reply("slept \(milliseconds)")
      }
      .cancellable(id: CancelID.sleep)
      .queued(id: QueueID.replies)
    case ("quit", 1):
      state.isClosed = true
      state.isTimerRunning = false
      return .merge(
        .cancel(id: CancelID.timer),
        .cancel(id: CancelID.idle),
        self.send("bye"),
        self.closeAfterReplies()
      )
    case (nil, _):
      return self.send("error: empty line")
    default:
      let shown = line.count > 40 ? "\(line.prefix(40))..." : line
      return self.send("error: unknown command '\(shown)'")
    }
  }

  /// Writes `line` after every reply queued before it.
  private func send(_ line: String) -> Effect<Action> {
    let reply = self.reply
    return .run { _ in await reply(line) }.queued(id: QueueID.replies)
  }

  private func closeAfterReplies() -> Effect<Action> {
    let close = self.close
    return .run { _ in await close() }.queued(id: QueueID.replies)
  }

  private func restartIdleTimeout() -> Effect<Action> {
    .send(.idleTimedOut).debounce(id: CancelID.idle, for: self.idleTimeout, clock: self.clock)
  }
}

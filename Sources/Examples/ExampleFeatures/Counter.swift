public import Unidirectional

/// The seeds' counter case study: a delayed re-increment, a speeding timer, a number fact and
/// the nth prime of the count.
public struct Counter: Reducer {
  /// The counter and what its effects reported.
  public struct State: Equatable, Sendable {
    /// The count.
    public var count = 0
    /// Whether the speeding timer runs.
    public var isTimerRunning = false
    /// The nth-prime computation's progress, while it runs.
    public var progress: Double?
    /// The last fact or prime found.
    public var fact: String?

    /// A counter at `count`.
    public init(count: Int = 0) {
      self.count = count
    }
  }

  /// The commands and what effects feed back.
  public enum Action: Equatable, Sendable {
    case incrementTapped, decrementTapped, decrementDelayResponse
    case startTimerTapped, stopTimerTapped, timerTick
    case factTapped, factResponse(String)
    case nthPrimeTapped, nthPrimeProgress(Double), nthPrimeResponse(Int)
  }

  /// The counter's cancellable effects.
  public enum CancelID: Hashable, Sendable { case delay, timer, prime }

  @Dependency(\.continuousClock) var clock
  @Dependency(\.numberFact) var numberFact

  /// Creates the feature; its clock and fact client are dependencies.
  public init() {}

  /// Runs one command or effect result.
  public func reduce(into state: inout State, action: Action) -> Effect<Action> {
    switch action {
    case .decrementTapped:
      state.count -= 1
      guard state.count < 0 else { return .none }
      return .run { [clock] send in
        try await clock.sleep(for: .seconds(1))
        await send(.decrementDelayResponse)
      }
      .cancellable(id: CancelID.delay)

    case .decrementDelayResponse:
      if state.count < 0 { state.count += 1 }
      return .none

    case .incrementTapped:
      state.count += 1
      return state.count >= 0 ? .cancel(id: CancelID.delay) : .none

    case .startTimerTapped:
      state.isTimerRunning = true
      return .run { [clock] send in
        // A timer that speeds up: 1000 ms, 950 ms, 900 ms, … down to 10 ms.
        var interval = Duration.seconds(1)
        while true {
          try await clock.sleep(for: interval)
          await send(.timerTick)
          interval = max(.milliseconds(10), interval - .milliseconds(50))
        }
      }
      .cancellable(id: CancelID.timer, cancelInFlight: true)

    case .stopTimerTapped:
      state.isTimerRunning = false
      return .cancel(id: CancelID.timer)

    case .timerTick:
      state.count += 1
      return .none

    case .factTapped:
      state.fact = nil
      return .run { [count = state.count, numberFact] send in
        await send(.factResponse(try await numberFact.fetch(count)))
      } catch: { error, send in
        await send(.factResponse("Couldn't load a fact: \(error)"))
      }

    case .factResponse(let fact):
      state.fact = fact
      return .none

    case .nthPrimeTapped:
      state.progress = 0
      return .run { [n = state.count] send in
        await computeNthPrime(
          max(n, 1),
          progress: { fraction, _ in .nthPrimeProgress(fraction) },
          response: { .nthPrimeResponse($0) },
          send: send
        )
      }
      .cancellable(id: CancelID.prime, cancelInFlight: true)

    case .nthPrimeProgress(let progress):
      state.progress = progress
      return .none

    case .nthPrimeResponse(let prime):
      state.progress = nil
      state.fact = "The \(ordinal(max(state.count, 1))) prime is \(prime)."
      return .none
    }
  }
}

/// The ordinal of a number: `1st`, `2nd`, `3rd`, `4th`, `11th`, `21st`, and so on.
public func ordinal(_ number: Int) -> String {
  let suffix: String
  switch (number % 10, number % 100) {
  case (_, 11...13): suffix = "th"
  case (1, _): suffix = "st"
  case (2, _): suffix = "nd"
  case (3, _): suffix = "rd"
  default: suffix = "th"
  }
  return "\(number)\(suffix)"
}

import Unidirectional

/// The seeds' counter case study, as the API contract writes it.
struct Counter: Reducer {
  struct State: Equatable, Sendable {
    var count = 0
    var isTimerRunning = false
    var progress: Double?
    var fact: String?
  }

  enum Action: Equatable, Sendable {
    case incrementTapped, decrementTapped, decrementDelayResponse
    case startTimerTapped, stopTimerTapped, timerTick
    case speedingTimerTapped
    case nthPrimeTapped, nthPrimeProgress(Double), nthPrimeResponse(Int)
    case task
  }

  enum CancelID: Hashable, Sendable { case delay, timer }

  var clock: any Clock<Duration> = ContinuousClock()

  func reduce(into state: inout State, action: Action) -> Effect<Action> {
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
      state.count += 1
      return .none
    case .incrementTapped:
      state.count += 1
      return state.count >= 0 ? .cancel(id: CancelID.delay) : .none
    case .startTimerTapped:
      state.isTimerRunning = true
      return .run { [clock] send in
        for await _ in clock.timer(interval: .seconds(1)) { await send(.timerTick) }
      }
      .cancellable(id: CancelID.timer, cancelInFlight: true)
    case .speedingTimerTapped:
      state.isTimerRunning = true
      return .run { [clock] send in
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
    case .nthPrimeTapped, .task:
      state.progress = 0
      return .run { [n = state.count] send in
        await nthPrime(n, send: send)
      }
    case .nthPrimeProgress(let progress):
      state.progress = progress
      return .none
    case .nthPrimeResponse(let prime):
      state.progress = nil
      state.fact = "The \(state.count)th prime is \(prime)."
      return .none
    }
  }
}

/// The seeds' nth-prime logic: progress every 1,000 numbers checked, then the prime.
private func nthPrime(_ n: Int, send: Send<Counter.Action>) async {
  var primeCount = 0
  var prime = 2
  while primeCount < n {
    if Task.isCancelled { return }
    if isPrime(prime) { primeCount += 1 }
    if prime % 1_000 == 0 {
      await send(.nthPrimeProgress(Double(primeCount) / Double(n)))
    }
    prime += 1
  }
  await send(.nthPrimeResponse(prime - 1))
}

private func isPrime(_ p: Int) -> Bool {
  if p <= 1 { return false }
  if p <= 3 { return true }
  var i = 2
  while i * i <= p {
    if p % i == 0 { return false }
    i += 1
  }
  return true
}

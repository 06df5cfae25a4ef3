import Testing
import Unidirectional

/// Timers against a model: which generations fire, in which order, given random arms, re-arms,
/// cancellations and advances on a test clock.
private struct Timers: Reducer {
  struct State: Sendable {
    var fired: [Int] = []
    /// Generations cancelled so far, and firings of them seen afterwards (the racing oracle).
    var cancelled: Set<Int> = []
    var live: [Int: [Int]] = [:]
    var violations: [Int] = []
  }

  enum Action: Sendable {
    case arm(generation: Int, id: Int, delay: Duration, cancelInFlight: Bool)
    /// A debounced `.run` that sends `.fired`: a timer record until its deadline, then a task.
    case debounce(generation: Int, id: Int, delay: Duration)
    case cancel(id: Int)
    case fired(generation: Int)
  }

  let clock: any Clock<Duration>

  func reduce(into state: inout State, action: Action) -> Effect<Action> {
    switch action {
    case .arm(let generation, let id, let delay, let cancelInFlight):
      if cancelInFlight {
        state.cancelled.formUnion(state.live[id] ?? [])
        state.live[id] = []
      }
      state.live[id, default: []].append(generation)
      return .send(.fired(generation: generation), after: delay, clock: self.clock)
        .cancellable(id: id, cancelInFlight: cancelInFlight)
    case .debounce(let generation, let id, let delay):
      state.cancelled.formUnion(state.live[id] ?? [])
      state.live[id] = [generation]
      return .run { send in await send(.fired(generation: generation)) }
        .debounce(id: id, for: delay, clock: self.clock)
    case .cancel(let id):
      state.cancelled.formUnion(state.live[id] ?? [])
      state.live[id] = []
      return .cancel(id: id)
    case .fired(let generation):
      if state.cancelled.contains(generation) { state.violations.append(generation) }
      state.fired.append(generation)
      return .none
    }
  }
}

/// Runs random operations on one store and a test clock; returns what fired and what the model
/// says should have, in order.
private func runModel(
  seed: UInt64,
  configuration: StoreConfiguration
) async -> (
  fired: [Int], expected: [Int]
) {
  let clock = TestClock()
  let store = Store(
    initialState: Timers.State(),
    reducer: Timers(clock: clock),
    configuration: configuration
  )
  var random = SplitMix64(state: seed)
  // The model: armed timers as (deadline, arming order, generation, id).
  var armed: [(deadline: Duration, order: Int, generation: Int, id: Int)] = []
  var expected: [Int] = []
  var order = 0
  for generation in 0..<1_000 {
    let id = Int(random.next() % 6)
    switch random.next() % 10 {
    case 0..<5:
      let delay = Duration.milliseconds(Int64(random.next() % 50))
      let cancelInFlight = random.next() % 2 == 0
      if cancelInFlight { armed.removeAll { $0.id == id } }
      armed.append((clock.now.offset + delay, order, generation, id))
      order += 1
      await store.send(
        .arm(generation: generation, id: id, delay: delay, cancelInFlight: cancelInFlight)
      )
    case 5..<7:
      armed.removeAll { $0.id == id }
      await store.send(.cancel(id: id))
    default:
      let target = clock.now.offset + .milliseconds(Int64(random.next() % 40))
      let due = armed.filter { $0.deadline <= target }
        .sorted { ($0.deadline, $0.order) < ($1.deadline, $1.order) }
      expected += due.map(\.generation)
      armed.removeAll { $0.deadline <= target }
      await clock.advance(to: TestClock.Instant(offset: target))
    }
  }
  let fired = await store.state.fired
  await store.shutdown()
  return (fired, expected)
}

@Suite(.timeLimit(.minutes(2))) struct TimerOracle {
  @Test(arguments: [1, 2, 3, 4, 5] as [UInt64])
  func timersFireExactlyAsTheModelSays(seed: UInt64) async {
    let (fired, expected) = await runModel(seed: seed, configuration: StoreConfiguration())
    #expect(expected.count > 100, "the run must fire timers")
    #expect(fired == expected, "seed \(seed)")
  }

  @Test func theModelCatchesABrokenCancel() async {
    var configuration = StoreConfiguration()
    configuration.cancelsTimers = false
    configuration.checksDelivery = false
    var mismatches = 0
    for seed: UInt64 in [1, 2, 3] {
      let (fired, expected) = await runModel(seed: seed, configuration: configuration)
      if fired != expected { mismatches += 1 }
    }
    #expect(mismatches == 3)
  }

  /// Four concurrent drivers arm, re-arm, debounce and cancel timers of 0–200 µs on the continuous
  /// clock, so cancellations and re-arms race firings; then the store shuts down with timers
  /// armed.
  private func race(seed: UInt64, configuration: StoreConfiguration) async -> Timers.State {
    let store = Store(
      initialState: Timers.State(),
      reducer: Timers(clock: ContinuousClock()),
      configuration: configuration
    )
    let operations = Int(8_000 * stressScale)
    await withTaskGroup(of: Void.self) { group in
      for driver in 0..<4 {
        group.addTask {
          var random = SplitMix64(state: seed &+ UInt64(driver) &* 7_919)
          for step in 0..<(operations / 4) {
            let generation = driver * 1_000_000 + step
            let id = Int(random.next() % 8)
            let delay = Duration.microseconds(Int64(random.next() % 200))
            switch random.next() % 20 {
            case 0:
              // Wait for this one to fire (or be cancelled), so firings interleave with sends.
              await store.send(
                .arm(generation: generation, id: id, delay: delay, cancelInFlight: false)
              ).finish()
            case 1..<8:
              await store.send(
                .arm(generation: generation, id: id, delay: delay, cancelInFlight: false)
              )
            case 8..<12:
              await store.send(
                .arm(generation: generation, id: id, delay: delay, cancelInFlight: true)
              )
            case 12..<15:
              await store.send(.debounce(generation: generation, id: id, delay: delay))
            default:
              await store.send(.cancel(id: id))
            }
          }
        }
      }
    }
    let state = await store.state
    // Shutdown racing the firings of whatever is still armed.
    await store.shutdown()
    #expect(store.liveEffectCount == 0)
    #expect(store.registeredIdentifierCount == 0)
    return state
  }

  @Test(arguments: [1, 2, 3, 4, 5] as [UInt64])
  func noTimerFiresIntoTheReducerAfterItsCancelWasReduced(seed: UInt64) async {
    let state = await race(seed: seed, configuration: StoreConfiguration())
    #expect(state.fired.count > 0, "timers must fire")
    #expect(
      state.violations.isEmpty,
      "seed \(seed): \(state.violations.count) cancelled timers fired"
    )
  }

  @Test(
    .enabled(if: stressScale >= 1, "timing-dependent; skipped in the scaled-down sanitizer runs")
  )
  func theRacingOracleCatchesABrokenCancel() async {
    var configuration = StoreConfiguration()
    configuration.cancelsTimers = false
    configuration.checksDelivery = false
    var violations = 0
    for seed: UInt64 in [1, 2, 3] {
      violations += await race(seed: seed, configuration: configuration).violations.count
    }
    #expect(violations > 0)
  }
}

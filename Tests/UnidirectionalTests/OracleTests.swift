import Testing
import Unidirectional
import UnidirectionalTesting

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The oracle's feature: the reducer logs which generations were cancelled and counts any
/// action that arrives from one of them afterwards.
private struct Oracle: Reducer {
  struct State: Sendable {
    var live: [Int: [Int]] = [:]
    var cancelled: Set<Int> = []
    var started = 0
    var emitted = 0
    var violations: [Int] = []
  }

  enum Action: Sendable {
    case start(generation: Int, id: Int, cancelInFlight: Bool)
    case cancel(id: Int)
    case emit(generation: Int)
    case ping
  }

  func reduce(into state: inout State, action: Action) -> Effect<Action> {
    switch action {
    case .start(let generation, let id, let cancelInFlight):
      if cancelInFlight {
        state.cancelled.formUnion(state.live[id] ?? [])
        state.live[id] = []
      }
      state.live[id, default: []].append(generation)
      state.started += 1
      return .run { send in
        // NB: never checks for cancellation itself: only the store stops its actions. The
        // short pause between emissions is the effect's "work"; it keeps effects in flight
        // while other drivers cancel them (a cancelled sleep returns at once, and the effect
        // carries on emitting, which is what the delivery check must stop).
        for _ in 0..<3 {
          await send(.emit(generation: generation))
          try? await Task.sleep(for: .microseconds(50))
        }
      }
      .cancellable(id: id, cancelInFlight: cancelInFlight)
    case .cancel(let id):
      state.cancelled.formUnion(state.live[id] ?? [])
      state.live[id] = []
      return .cancel(id: id)
    case .emit(let generation):
      if state.cancelled.contains(generation) {
        state.violations.append(generation)
      } else {
        state.emitted += 1
      }
      return .none
    case .ping:
      return .none
    }
  }
}

/// A small, seedable generator (SplitMix64), so a failing run can be replayed with `SEED=`.
struct SplitMix64: RandomNumberGenerator {
  var state: UInt64

  mutating func next() -> UInt64 {
    self.state &+= 0x9E37_79B9_7F4A_7C15
    var z = self.state
    z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
    z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
    return z ^ (z >> 31)
  }
}

/// Runs `operations` random operations from 4 concurrent drivers over 8 ids; returns the final
/// state after shutdown.
private func runOracle(seed: UInt64, operations: Int, checksDelivery: Bool) async -> Oracle.State {
  var configuration = StoreConfiguration()
  configuration.checksDelivery = checksDelivery
  let store = Store(initialState: Oracle.State(), reducer: Oracle(), configuration: configuration)
  let drivers = 4
  await withTaskGroup(of: Void.self) { group in
    for driver in 0..<drivers {
      group.addTask(priority: [.high, .medium, .low, .medium][driver]) {
        var random = SplitMix64(state: seed &+ UInt64(driver) &* 7_919)
        for step in 0..<(operations / drivers) {
          let generation = driver * 1_000_000 + step
          let id = Int(random.next() % 8)
          switch random.next() % 100 {
          case 0..<5:
            // Start and wait for the effect to end, so effects run even when the drivers
            // would otherwise starve the store's root task.
            await store.send(.start(generation: generation, id: id, cancelInFlight: false))
              .finish()
          case 5..<40:
            await store.send(.start(generation: generation, id: id, cancelInFlight: false))
          case 40..<55:
            await store.send(.start(generation: generation, id: id, cancelInFlight: true))
          case 55..<80:
            await store.send(.cancel(id: id))
          default:
            await store.send(.ping)
          }
        }
      }
    }
  }
  for id in 0..<8 { await store.send(.cancel(id: id)) }
  let state = await store.state
  await store.shutdown()
  #expect(store.liveEffectCount == 0)
  #expect(store.registeredIdentifierCount == 0)
  return state
}

/// Scales the stress tests down under sanitizers (`STRESS_SCALE=0.1` in `.ci/run`).
let stressScale: Double = {
  guard let text = getenv("STRESS_SCALE").map({ String(cString: $0) }), let scale = Double(text)
  else {
    return 1
  }
  return scale
}()

private var seeds: [UInt64] {
  if let text = getenv("SEED").map({ String(cString: $0) }), let seed = UInt64(text) {
    return [seed]
  }
  return [1, 2, 3, 4, 5]
}

@Suite(.timeLimit(.minutes(2))) struct CancellationOracle {
  @Test(arguments: seeds)
  func noActionFromACancelledEffectReachesTheReducer(seed: UInt64) async {
    let operations = Int(20_000 * stressScale)
    let state = await runOracle(seed: seed, operations: operations, checksDelivery: true)
    #expect(state.started > operations / 4)
    #expect(state.emitted > operations / 20, "effects must run and emit")
    #expect(
      state.violations.isEmpty,
      "seed \(seed): \(state.violations.count) actions from cancelled effects were reduced; replay with SEED=\(seed)"
    )
  }

  @Test(
    .enabled(if: stressScale >= 1, "timing-dependent; skipped in the scaled-down sanitizer runs")
  )
  func theOracleFailsWhenTheDeliveryCheckIsDisabled() async {
    var violations = 0
    var runs: [String] = []
    for seed in seeds {
      let state = await runOracle(seed: seed, operations: 4_000, checksDelivery: false)
      runs.append(
        "seed \(seed): started \(state.started) emitted \(state.emitted) cancelled \(state.cancelled.count) violations \(state.violations.count)"
      )
      violations += state.violations.count
    }
    // NB: no output on a passing run; the figures are in the message if it fails.
    #expect(violations > 0, "with the delivery check off: \(runs.joined(separator: "; "))")
  }

  @Test func everyInterleavingOfTwoEffectsAndACancelHonoursTheCancel() async {
    // NB: on a thread of its own: the exploration runs for seconds without suspending.
    let result = await Task(executorPreference: ThreadExecutor(name: "interleavings")) {
      await exploreInterleavings(checksDelivery: true)
    }.value
    let explored = "\(result.runs) interleavings, \(result.outcomes) distinct reducer logs"
    #expect(result.violations == 0, "\(explored)")
    #expect(result.runs > 100, "\(explored)")
    #expect(result.outcomes > 5, "\(explored)")
  }
}

/// Explores every order in which the ready jobs of "start A and B (3 emissions each), cancel A"
/// can run, with bounded unfairness; counts schedules where A emitted after the cancel.
private func exploreInterleavings(
  checksDelivery: Bool
) async -> (runs: Int, violations: Int, outcomes: Int) {
  var pending: [[Int]] = [[]]
  var runs = 0
  var violations = 0
  var outcomes: Set<[String]> = []
  // NB: a job that finds the store's actor scheduled re-enqueues itself, so an unfair
  // schedule that always skips the actor's job never ends. Bound the unfairness: at most
  // `maximumDetours` choices other than the oldest job per run (4: 114,707 schedules, 15
  // distinct logs; 3 under sanitizers: 11,261 schedules, 10 logs).
  let maximumDetours = stressScale < 1 ? 3 : 4
  while let prefix = pending.popLast() {
    let (counts, log) = await runInterleaving(choices: prefix, checksDelivery: checksDelivery)
    runs += 1
    outcomes.insert(log)
    // A cancel reduced before the start has nothing to cancel; after it, no emission of A.
    if let cancel = log.firstIndex(of: "cancel A"), let start = log.firstIndex(of: "start"),
      start < cancel, log[cancel...].contains(where: { $0.hasPrefix("A") })
    {
      violations += 1
    }
    guard prefix.filter({ $0 != 0 }).count < maximumDetours else { continue }
    for step in prefix.count..<counts.count where counts[step] > 1 {
      for alternative in 1..<counts[step] {
        pending.append(
          Array(prefix) + Array(repeating: 0, count: step - prefix.count) + [alternative]
        )
      }
    }
  }
  return (runs, violations, outcomes.count)
}

private struct TwoEffects: Reducer {
  typealias State = [String]

  enum Action: Sendable {
    case start
    case cancel
    case emit(String, Int)
  }

  func reduce(into state: inout [String], action: Action) -> Effect<Action> {
    switch action {
    case .start:
      state.append("start")
      return .merge(
        ["A", "B"].map { name in
          let effect = Effect<Action>.run { send in
            for index in 0..<3 { await send(.emit(name, index)) }
          }
          return name == "A" ? effect.cancellable(id: "A") : effect
        }
      )
    case .cancel:
      state.append("cancel A")
      return .cancel(id: "A")
    case .emit(let name, let index):
      state.append("\(name)\(index)")
      return .none
    }
  }
}

/// Runs the scenario choosing, at step `i`, the ready job `choices[i]` (0 past the end);
/// returns how many jobs were ready at each step, and the reducer's log.
private func runInterleaving(
  choices: [Int],
  checksDelivery: Bool
) async -> (counts: [Int], log: [String]) {
  let executor = ManualExecutor()
  var configuration = StoreConfiguration(executorPreference: executor)
  configuration.checksDelivery = checksDelivery
  let store = Store(initialState: [], reducer: TwoEffects(), configuration: configuration)
  // Both sends are jobs on the executor: the exploration covers every order of the two sends,
  // the effects' jobs and the hops back to the store.
  _ = Task(executorPreference: executor) { await store.send(.start) }
  _ = Task(executorPreference: executor) { await store.send(.cancel) }
  var counts: [Int] = []
  while executor.pendingJobCount > 0 {
    let ready = executor.pendingJobCount
    let choice = counts.count < choices.count ? choices[counts.count] : 0
    counts.append(ready)
    executor.runPendingJob(at: min(choice, ready - 1))
  }
  let log = await executor.perform { await store.state }
  await executor.perform { await store.shutdown() }
  return (counts, log)
}

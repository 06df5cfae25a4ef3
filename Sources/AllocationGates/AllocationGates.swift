// `swift run -c release AllocationGates`: allocation counts per operation, against thresholds.
//
// Fails (exit 1) when a figure rises above its threshold, or falls far below it (then the
// threshold is stale: lower it to the new figure).
import CAllocationCounter
import Synchronization
import Unidirectional

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

struct Feature: Reducer {
  struct State: Sendable { var count = 0 }
  enum Action: Sendable {
    case increment
    case silentEffect
    case burst(Int)
    /// Arms a timer under the idle id, cancelling the one armed before (an idle timeout
    /// restarted by a request).
    case armIdle
    /// `armIdle` marked `.cancelledOnShutdown()`, as a session's idle timer is.
    case armMarkedIdle
    /// A session's request: its idle timer re-armed and a `.run` that ends without suspending.
    case sessionRequest
    case cancelIdle
    /// Arms a timer due at this instant, whose firing is counted.
    case armFiring(at: ContinuousClock.Instant)
    case fired
  }

  enum TimerID: Hashable, Sendable { case idle }

  func reduce(into state: inout State, action: Action) -> Effect<Action> {
    switch action {
    case .increment:
      state.count &+= 1
      return .none
    case .silentEffect:
      return .run { _ in }
    case .burst(let count):
      return .run { send in
        for _ in 0..<count { await send(.increment) }
      }
    case .armIdle:
      return .send(.increment, after: .seconds(300), clock: ContinuousClock())
        .cancellable(id: TimerID.idle, cancelInFlight: true)
    case .armMarkedIdle:
      return .send(.increment, after: .seconds(300), clock: ContinuousClock())
        .cancellable(id: TimerID.idle, cancelInFlight: true)
        .cancelledOnShutdown()
    case .sessionRequest:
      state.count &+= 1
      return .merge(
        .send(.increment, after: .seconds(300), clock: ContinuousClock())
          .cancellable(id: TimerID.idle, cancelInFlight: true)
          .cancelledOnShutdown(),
        .run { _ in }
      )
    case .cancelIdle:
      return .cancel(id: TimerID.idle)
    case .armFiring(let deadline):
      let delay = ContinuousClock.now.duration(to: deadline)
      return .send(.fired, after: delay, clock: ContinuousClock())
    case .fired:
      let fired = firedTimers.add(1, ordering: .relaxed).newValue
      let waiter = allTimersFired.withLock { waiter -> CheckedContinuation<Void, Never>? in
        guard let (count, continuation) = waiter, fired == count else { return nil }
        waiter = nil
        return continuation
      }
      if let waiter {
        firingEnd.store(allocations(), ordering: .relaxed)
        waiter.resume()
      }
      return .none
    }
  }
}

/// An observer that takes every event a store reports and keeps none.
struct QuietObserver: StoreObserver {
  typealias State = Feature.State
  typealias Action = Feature.Action
  func actionReduced(_ action: Action, origin: ActionOrigin) {}
  func effectStarted(_ effect: EffectReference) {}
  func effectEnded(_ effect: EffectReference, outcome: EffectOutcome, duration: Duration) {}
}

/// Timers of `Feature.armFiring` that have fired.
let firedTimers = Atomic(0)
/// Resumed when this many timers have fired.
let allTimersFired = LockedBox<(Int, CheckedContinuation<Void, Never>)?>(nil)
/// The allocation count once every timer was armed, and once the last one fired.
let firingStart = Atomic<Int64>(0)
let firingEnd = Atomic<Int64>(0)

struct Gate {
  var name: String
  var threshold: Double
  var measured: Double
  /// Whether a figure far below the threshold means the threshold is stale (for per-operation
  /// counts; a leak bound has no floor).
  var rebaselines = true
  /// The figure the design aims at, when the threshold (today's figure, guarding against
  /// regressions) is above it.
  var target: Double? = nil

  /// Passes within the threshold, and not below half of it (then it should be lowered).
  var passes: Bool {
    self.measured <= self.threshold + 0.05
      && (!self.rebaselines || self.measured >= self.threshold / 2 - 0.5)
  }
}

/// Thresholds for the toolchain this was measured on; other versions re-baseline.
#if compiler(>=6.3)
// NB: a re-arm is 1: the timer's payload (the record is re-armed in place, the lifetime token of
// the send before is reused when nothing holds it, and a plain identifier of at most 8 bytes is
// kept in place, not boxed). Arming is 1 too: the payload, which becomes the record when nothing
// else holds the effect. An emitted
// action allocates nothing: at a threshold of 1 the "far below" check sat exactly at 0, and a
// run whose empty burst happened to allocate more than the full one (-0.0002) failed it.
// A session request (the benchmark's: a merge of the re-armed idle timer and a `.run`, through a
// registry) is 7; it was 10 while a lifetime's two units shared an array, 9 while every `.run`
// body, even one that cannot throw, was wrapped in a closure to catch its errors (as starting one
// effect was 6, now 5), and 8 while the `.run`'s record joined the timer's in the state machine's
// map (an array of two, allocated and freed per request; the `.run` is listed now).
// The same request on an observed store is 10: its `.run` is timed by a closure made per effect,
// started through a closure that binds what the observer captured, and binds the store's
// reporter, whose frames take a second slab of the task allocator. Taking those three out (to
// 7) moved no row of the HTTP benchmark's observed request (Benchmarks/HISTORY.md), so they stay
// out of the runtime, and this gate keeps the path from growing.
let thresholds = (
  sendNone: 0.0, startEffect: 5.5, perEmittedAction: 0.0, cycleDrift: 5.0,
  armTimer: 1.0, armWithoutReuse: 1.0, rearmTimer: 1.0, fireTimer: 0.0, sessionRequest: 7.0,
  observedRequest: 10.0
)
#else
let thresholds = (
  sendNone: 0.0, startEffect: 14.0, perEmittedAction: 2.0, cycleDrift: 5.0,
  armTimer: 3.0, armWithoutReuse: 3.0, rearmTimer: 3.0, fireTimer: 0.0, sessionRequest: 20.0,
  observedRequest: 23.0
)
#endif

func allocations() -> Int64 { Int64(allocation_counter_allocations()) }

/// Allocations per session request to one key of `sessions`, after a warm-up: the least of five
/// rounds of `count`.
func requestAllocations(_ sessions: StoreRegistry<Int, Feature>, count: Int) async -> Double {
  for _ in 0..<1_000 { _ = try? await sessions.send(.sessionRequest, to: 1) }
  var least = Double.infinity
  for _ in 0..<5 {
    let start = allocations()
    for _ in 0..<count { _ = try? await sessions.send(.sessionRequest, to: 1) }
    least = min(least, Double(allocations() - start) / Double(count))
  }
  return least
}
func live() -> Int64 { Int64(allocation_counter_allocations() - allocation_counter_frees()) }

@concurrent
func measure(cycleCount: Int, rounds: Int) async -> [Gate] {
  let store = Store(initialState: Feature.State()) { Feature() }
  for _ in 0..<1_000 { await store.send(.increment) }
  await store.send(.silentEffect).finish()
  await store.send(.burst(100)).finish()

  var start = allocations()
  for _ in 0..<10_000 { await store.send(.increment) }
  let sendNone = Double(allocations() - start) / 10_000

  // NB: the least of five rounds: whether `finish()` finds the effect still running, and wakes
  // a worker thread whose dispatch caches are cold, depends on timing, and on a busy machine a
  // round read up to 6.75 where the runtime's own path is 6 (the gate failed on the stop's
  // starting commit as well). A round with none of that noise is the figure this code owns.
  var startEffect = Double.infinity
  for _ in 0..<5 {
    start = allocations()
    for _ in 0..<1_000 { await store.send(.silentEffect).finish() }
    startEffect = min(startEffect, Double(allocations() - start) / 1_000)
  }

  start = allocations()
  await store.send(.burst(0)).finish()
  let emptyBurst = allocations() - start
  start = allocations()
  await store.send(.burst(10_000)).finish()
  let perEmitted = Double(allocations() - start - emptyBurst) / 10_000

  // Timers are records in their clock's timer queue: arming one on a store with no other
  // effect, re-arming it in place of the one before (an idle timeout restarted by a request),
  // and firing start no task.
  let timerCount = 10_000
  let timerStores = (0..<timerCount).map { _ in Store(initialState: Feature.State()) { Feature() } }
  // NB: a store's first effect sets up its effect bookkeeping (once per store, not per timer).
  for store in timerStores {
    await store.send(.armIdle)
    await store.send(.cancelIdle)
  }
  start = allocations()
  for store in timerStores { await store.send(.armIdle) }
  let armTimer = Double(allocations() - start) / Double(timerCount)
  // With the last timer's record still held by the `StoreTask` of the send that armed it: the
  // effect's payload becomes the new record all the same.
  let heldTimerStores = (0..<timerCount).map { _ in
    Store(initialState: Feature.State()) { Feature() }
  }
  var heldTasks: [StoreTask] = []
  for store in heldTimerStores {
    heldTasks.append(await store.send(.armIdle))
    await store.send(.cancelIdle)
  }
  start = allocations()
  for store in heldTimerStores { await store.send(.armIdle) }
  let armWithoutReuse = Double(allocations() - start) / Double(timerCount)
  heldTasks.removeAll()
  for store in heldTimerStores { await store.shutdown() }
  let rearmStore = timerStores[0]
  for _ in 0..<1_000 { await rearmStore.send(.armIdle) }
  start = allocations()
  for _ in 0..<timerCount { await rearmStore.send(.armIdle) }
  let rearmTimer = Double(allocations() - start) / Double(timerCount)
  // The shutdown mark folds into the timer: no allocation of its own.
  await rearmStore.send(.cancelIdle)
  for _ in 0..<1_000 { await rearmStore.send(.armMarkedIdle) }
  start = allocations()
  for _ in 0..<timerCount { await rearmStore.send(.armMarkedIdle) }
  let rearmMarkedTimer = Double(allocations() - start) / Double(timerCount)
  for store in timerStores { await store.shutdown() }

  // A session request through a registry: the `.run` starts on this thread once the send has
  // left the store and ends before `send(_:to:)` returns, so nothing here depends on timing.
  let sessions = StoreRegistry<Int, Feature>(idleTimeout: .seconds(300)) { _ in
    Feature.State()
  } reducer: {
    Feature()
  }
  let sessionRequest = await requestAllocations(sessions, count: timerCount)
  await sessions.shutdown(gracePeriod: .zero)

  // The same request on a store with an observer that takes every event and does nothing with
  // it: what observing costs the runtime itself, apart from what an observer does.
  let observedSessions = StoreRegistry<Int, Feature>(
    idleTimeout: .seconds(300),
    observer: { _ in QuietObserver() }
  ) { _ in
    Feature.State()
  } reducer: {
    Feature()
  }
  let observedRequest = await requestAllocations(observedSessions, count: timerCount)
  await observedSessions.shutdown(gracePeriod: .zero)

  // Firing: arm a timer on each store, all due at one instant two seconds from now, then count
  // from before the first fires until the last one's action has been reduced.
  // NB: one instant, not each timer half a second after its arming: on a loaded machine the
  // arming took long enough to spread the deadlines, and the clock's driver then slept between
  // them (a sleep allocates), which this gate counted against the firings (0.25 a timer in one
  // CI run, 0.001 otherwise).
  let firingStores = (0..<timerCount).map { _ in
    Store(initialState: Feature.State()) { Feature() }
  }
  for store in firingStores { await store.send(.increment) }
  await withCheckedContinuation { continuation in
    allTimersFired.withLock { $0 = (timerCount, continuation) }
    firedTimers.store(0, ordering: .relaxed)
    Task {
      let deadline = ContinuousClock.now + .seconds(2)
      for store in firingStores { await store.send(.armFiring(at: deadline)) }
      firingStart.store(allocations(), ordering: .relaxed)
    }
  }
  let firingAllocations =
    firingEnd.load(ordering: .relaxed) - firingStart.load(ordering: .relaxed)
  let fireTimer = Double(firingAllocations) / Double(timerCount)
  for store in firingStores { await store.shutdown() }
  await store.shutdown()

  func cycle() async {
    let store = Store(initialState: Feature.State()) { Feature() }
    await store.send(.increment)
    await store.send(.burst(1)).finish()
    await store.shutdown()
  }
  // NB: the first thousands of cycles fill one-off caches (~1,000 blocks once).
  for _ in 0..<10_000 { await cycle() }
  // NB: the runtime's caches (task allocator slabs, metadata, worker threads) grow now and
  // then (they settle after a few rounds, at a point that varies from run to run: five
  // rounds sometimes all fell before it); a leak grows in every round. So the gate takes the
  // *smallest* drift of ten rounds, and when none of them is within the threshold it measures up
  // to as many more, ending at the first that is: in one CI run on a busy machine the caches
  // still grew by 34-62 blocks a round for eight rounds of ten (8 and 6 in the last two), while
  // a leak of one block in every 1,000 cycles grows the count by 10 in every round, however
  // many rounds there are.
  var drifts: [Int64] = []
  for round in 0..<(2 * rounds) {
    if round >= rounds, let least = drifts.map({ abs($0) }).min(),
      Double(least) <= thresholds.cycleDrift
    {
      break
    }
    let before = live()
    for _ in 0..<cycleCount { await cycle() }
    drifts.append(live() - before)
  }
  let drift = Double(drifts.map { abs($0) }.min() ?? 0)

  // The same with raw primitives, for scale: an actor, a call, a task-group child.
  actor Bare { var count = 0; func increment() { count += 1 } }
  func floorCycle() async {
    // What a store's cycle does with raw primitives: an actor, a call, an unstructured task
    // that calls the actor (the store's effect task).
    let bare = Bare()
    await bare.increment()
    let effect = Task<Void, Never>.detached { await bare.increment() }
    _ = await effect.result
  }
  for _ in 0..<1_000 { await floorCycle() }
  var floorDrifts: [Int64] = []
  for _ in 0..<5 {
    let before = live()
    for _ in 0..<cycleCount { await floorCycle() }
    floorDrifts.append(live() - before)
  }
  print("raw-primitive cycles, net live blocks per round (runtime noise): \(floorDrifts)")
  print("store cycles, net live blocks per round: \(drifts)")

  return [
    Gate(
      name: "send returning .none, per action",
      threshold: thresholds.sendNone,
      measured: sendNone
    ),
    Gate(
      name: "starting one effect (run to its end)",
      threshold: thresholds.startEffect,
      measured: startEffect
    ),
    Gate(
      name: "each action an effect emits",
      threshold: thresholds.perEmittedAction,
      measured: perEmitted
    ),
    Gate(
      name: "arming a timer on a store with no live effect (its last timer ended)",
      threshold: thresholds.armTimer,
      measured: armTimer,
      target: 1
    ),
    Gate(
      name: "arming a timer while the last one's task is held",
      threshold: thresholds.armWithoutReuse,
      measured: armWithoutReuse,
      target: 1
    ),
    Gate(
      name: "re-arming a timer (cancelInFlight), per action",
      threshold: thresholds.rearmTimer,
      measured: rearmTimer,
      target: 1
    ),
    Gate(
      name: "re-arming a timer marked .cancelledOnShutdown(), per action",
      threshold: thresholds.rearmTimer,
      measured: rearmMarkedTimer,
      target: 1
    ),
    Gate(
      name: "a session request through a registry (timer re-armed, a .run run to its end)",
      threshold: thresholds.sessionRequest,
      measured: sessionRequest
    ),
    Gate(
      name: "the same session request on an observed store",
      threshold: thresholds.observedRequest,
      measured: observedRequest
    ),
    Gate(
      name: "a timer firing (beyond its action's own)",
      threshold: thresholds.fireTimer,
      measured: fireTimer
    ),
    Gate(
      name:
        "10,000 create-send-effect-shutdown cycles, net live blocks (least of \(drifts.count) rounds)",
      threshold: thresholds.cycleDrift,
      measured: drift,
      rebaselines: false
    ),
  ]
}

/// Measures the allocation figures and checks them against their thresholds.
@main
struct AllocationGates {
  static func main() async {
    guard allocation_counter_enabled() == 1 else {
      print(
        "AllocationGates: allocation counting is compiled out in this build (sanitizers); skipped"
      )
      exit(0)
    }
    #if DEBUG
    print(
      "warning: a debug build; run `swift run -c release AllocationGates` for the gated figures"
    )
    #endif
    let cycleCount = CommandLine.arguments.dropFirst().first.flatMap { Int($0) } ?? 10_000
    let rounds = CommandLine.arguments.dropFirst(2).first.flatMap { Int($0) } ?? 10
    let gates = await measure(cycleCount: cycleCount, rounds: rounds)
    var failed = false
    for gate in gates {
      let verdict =
        gate.passes
        ? "ok" : (gate.measured > gate.threshold ? "FAIL (above)" : "FAIL (far below: re-baseline)")
      let target = gate.target.map { target in
        gate.measured <= target + 0.05 ? "; target ≤\(target): met" : "; target ≤\(target): MISS"
      }
      print(
        "\(gate.name): \(gate.measured) allocations (threshold \(gate.threshold)\(target ?? "")) "
          + verdict
      )
      if !gate.passes { failed = true }
    }
    exit(failed ? 1 : 0)
  }
}

public import CUnidirectional

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The planner's three arrays, lent per thread: a store holds them only while it plans and
/// submits one action's effects (synchronously, on one thread), so their capacity is not kept
/// in every store (160 B of an armed store, ~290 B of a session), and no action allocates them
/// anew.
///
/// A nested use on the same thread (an observer that starts work on another store inline) finds
/// the arrays lent and allocates its own; the first ones returned are kept.
///
/// NB: its fields skip the run-time exclusivity checks: a scratch belongs to one thread, and no
/// access to a field overlaps another (each is a read or a write of the whole field; `.ci/run`
/// stage 6b checks it); the checks showed on the registry's send rows (`Benchmarks/HISTORY.md`).
@usableFromInline final class PlanScratch {
  @exclusivity(unchecked) var steps: [PlanStep] = []
  @exclusivity(unchecked) var jobs: [any EffectJob] = []
  @exclusivity(unchecked) var timers: [TimerEntry] = []
  /// Whether a ``Store/trySendStartingEffectsHere(_:reading:)`` on this thread collects the tasks
  /// stores are about to start (``EffectSupervisor/apply(_:jobs:)``) instead of starting them.
  @usableFromInline @exclusivity(unchecked) var isHoldingStarts = false
  /// The tasks it collected.
  @usableFromInline @exclusivity(unchecked) var heldStarts = EffectStarts()

  /// The starts held back since ``isHoldingStarts`` was set; none are left held.
  @inlinable func takeHeldStarts() -> EffectStarts {
    guard !self.heldStarts.isEmpty else { return EffectStarts() }
    defer { self.heldStarts = EffectStarts() }
    return self.heldStarts
  }

  /// Calls `body` with the calling thread's scratch arrays, borrowed.
  ///
  /// NB: read from a C `__thread` variable (one instruction); `pthread_getspecific` was a library
  /// call on every plan and every registry send. Borrowed (a strong reference held across the
  /// send it brackets retained and released it each time): the thread's key holds it until the
  /// thread exits, and `body` runs synchronously on this thread, so it outlives the borrow.
  @inlinable @inline(__always)
  static func withCurrent<Result>(_ body: (PlanScratch) -> Result) -> Result {
    let pointer = cunidirectional_get_plan_scratch() ?? self.makeCurrent()
    return Unmanaged<PlanScratch>.fromOpaque(pointer)._withUnsafeGuaranteedRef(body)
  }

  @usableFromInline @inline(never)
  static func makeCurrent() -> UnsafeMutableRawPointer {
    let pointer = Unmanaged.passRetained(PlanScratch()).toOpaque()
    pthread_setspecific(planScratchKey, pointer)
    cunidirectional_set_plan_scratch(pointer)
    return pointer
  }
}

/// The thread-specific slot of ``PlanScratch``: it releases a thread's scratch when the thread
/// exits.
private let planScratchKey: pthread_key_t = {
  var key = pthread_key_t()
  let status = pthread_key_create(&key) { pointer in
    guard let pointer else { return }
    // NB: the destructor runs on the exiting thread: a later use there (another key's
    // destructor that plans an action) makes a new scratch instead of reading a freed one.
    cunidirectional_set_plan_scratch(nil)
    Unmanaged<PlanScratch>.fromOpaque(pointer).release()
  }
  precondition(status == 0, "pthread_key_create failed: \(status)")
  return key
}()

extension EffectPlanner {
  /// Borrows the thread's scratch arrays (the caller checks ``holdsScratch`` first).
  @usableFromInline mutating func borrowScratch() {
    self.holdsScratch = true
    PlanScratch.withCurrent { scratch in
      swap(&self.steps, &scratch.steps)
      swap(&self.jobs, &scratch.jobs)
      swap(&self.timers, &scratch.timers)
    }
  }

  /// Hands the (empty) arrays back to the thread, or drops them when the thread's slot was
  /// refilled meanwhile (a nested use) or they grew large (one action with hundreds of effects
  /// must not leave every pool thread holding arrays that size).
  @usableFromInline mutating func returnScratch() {
    self.holdsScratch = false
    let limit = 64
    PlanScratch.withCurrent { scratch in
      if scratch.steps.capacity == 0 && scratch.jobs.capacity == 0
        && scratch.timers.capacity == 0, self.steps.capacity <= limit,
        self.jobs.capacity <= limit, self.timers.capacity <= limit
      {
        swap(&self.steps, &scratch.steps)
        swap(&self.jobs, &scratch.jobs)
        swap(&self.timers, &scratch.timers)
      }
    }
    self.steps = []
    self.jobs = []
    self.timers = []
  }
}

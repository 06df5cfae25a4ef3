import Synchronization

/// One unit of asynchronous effect work: a `.run` body, or a `.send` that runs after earlier
/// asynchronous work in a `.concatenate`.
///
/// The box is the per-effect token of the delivery rule: the store drops any action whose box is
/// cancelled, checking on its own executor when the action arrives. It is created and registered
/// under its cancellation identifiers when the reducer *returns* the effect, so a cancellation
/// processed before the work starts means the work never runs.
///
/// Safety: `cancelled` is atomic. `keys` and `lifetime` are immutable. Every `var` below is
/// read and written only while the owning `EffectRuntime`'s lock is held, which also rules out
/// overlapping accesses (so they skip dynamic exclusivity checks).
@usableFromInline final class EffectBox: @unchecked Sendable {
  private let cancelled = Atomic<Bool>(false)

  /// The identifiers this effect is registered under (outermost first).
  let keys: [CancelKey]

  /// The lifetime (``StoreTask``) this effect belongs to.
  @usableFromInline let lifetime: EffectLifetime

  /// Where the work is.
  @exclusivity(unchecked) var phase = Phase.pending

  /// How many threads are between reading `.running(task)` and calling `task.cancel()`; the
  /// task must stay alive until they are done (see `EffectRuntime.finish`).
  @exclusivity(unchecked) var cancelsInProgress = 0

  /// The effect's task, waiting to finish until `cancelsInProgress` drops to zero.
  @exclusivity(unchecked) var finishWaiter: UnsafeContinuation<Void, Never>?

  enum Phase {
    case pending
    // Safety: the task pointer is only used while the lock is held or `cancelsInProgress` pins
    // it; the task clears this phase (under the lock) before it can end.
    case running(UnsafeCurrentTask)
    case finished
  }

  init(keys: [CancelKey], lifetime: EffectLifetime) {
    self.keys = keys
    self.lifetime = lifetime
  }

  /// Whether the effect was cancelled; read without the lock at delivery.
  @usableFromInline var isCancelled: Bool {
    self.cancelled.load(ordering: .acquiring)
  }

  /// Marks the box cancelled; call with the runtime's lock held.
  func markCancelled() {
    self.cancelled.store(true, ordering: .releasing)
  }
}

/// The effects started by one action sent to a store, and by the actions they sent: what a
/// ``StoreTask`` refers to.
///
/// Safety: every `var` is read and written only while `runtime`'s lock is held, which also
/// rules out overlapping accesses (so they skip dynamic exclusivity checks).
@usableFromInline final class EffectLifetime: @unchecked Sendable {
  let runtime: EffectRuntime

  /// The unfinished effects of this lifetime: usually one (kept inline to save a dictionary
  /// allocation per action), then any others.
  @exclusivity(unchecked) private var firstBox: EffectBox?
  @exclusivity(unchecked) private var otherBoxes: [ObjectIdentifier: EffectBox] = [:]

  /// Whether every effect of this lifetime has finished.
  var hasNoBoxes: Bool {
    self.firstBox == nil && self.otherBoxes.isEmpty
  }

  func insert(_ box: EffectBox) {
    if self.firstBox == nil {
      self.firstBox = box
    } else {
      self.otherBoxes[ObjectIdentifier(box)] = box
    }
  }

  func remove(_ box: EffectBox) {
    if self.firstBox === box {
      self.firstBox = nil
    } else {
      self.otherBoxes.removeValue(forKey: ObjectIdentifier(box))
    }
  }

  /// Every unfinished effect of this lifetime.
  var allBoxes: [EffectBox] {
    (self.firstBox.map { [$0] } ?? []) + self.otherBoxes.values
  }

  /// Whether ``StoreTask/cancel()`` was called; effects joining later are born cancelled.
  @exclusivity(unchecked) var isCancelled = false

  /// The first task suspended in ``StoreTask/finish()`` (most lifetimes have at most one:
  /// kept inline to save an array allocation), then any others.
  @exclusivity(unchecked) var waiter: UnsafeContinuation<Void, Never>?
  @exclusivity(unchecked) var waiters: [UnsafeContinuation<Void, Never>] = []

  /// What started this lifetime, recorded only when the store reports to a test harness.
  @exclusivity(unchecked) var origin: EffectOrigin?

  init(runtime: EffectRuntime) {
    self.runtime = runtime
  }
}

/// The action (and where it was sent) that started a lifetime, for test diagnostics.
package struct EffectOrigin: Sendable {
  /// The order in which the actions were sent.
  package var sequence: Int
  package var action: String
  package var fileID: String
  package var filePath: String
  package var line: Int
  package var column: Int
}

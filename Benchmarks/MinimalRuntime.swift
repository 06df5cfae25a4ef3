import Synchronization

// A reference for the session rows, not a floor: the least an effect runtime must do per session
// request, written by hand. It keeps the obligations a store's runtime has and the plain actor
// does not: the `.run` is a task of its own (started on the sender's thread, once the sender has
// left the session's actor), which the session owns (a list under a lock, to count, cancel and
// wait for it) and which runs with the session bound as a task-local; the idle timer is a
// deadline in a queue every session on the clock shares (under that queue's lock); the session is
// found by key under the registry's lock; each reduce records its activity on the clock. It has
// none of the rest: no `StoreTask` or lifetimes, no cancellation identifiers, no observer hooks,
// no shutdown. Read next to the library's row, it tells how much of the gap to the plain actor is
// a task per `.run` and how much is the library's bookkeeping around it.

/// One running `.run` of a minimal session: a node of its session's list.
// Safety: `next`, `previous` and `isCancelled` are read and written only under the owning
// session's `live` lock; `snapshot` is immutable. `previous` is unowned: while a node is in the
// list, the node before it is too (the list holds it), and a node's removal relinks its
// neighbours under the lock before anything else reads them. (A `weak` reference would allocate
// a side table per node, which the minimal runtime has no need of.)
final class MinimalEffect: @unchecked Sendable {
  var next: MinimalEffect?
  unowned(unsafe) var previous: MinimalEffect?
  var isCancelled = false
  let snapshot: SessionFeature.State

  init(snapshot: SessionFeature.State) {
    self.snapshot = snapshot
  }
}

/// The idle deadlines of a registry's sessions, one slot each, under one lock (the clock's queue).
final class MinimalTimerQueue: Sendable {
  let deadlines: Mutex<[ContinuousClock.Instant]>

  init(slots: Int) {
    self.deadlines = Mutex(Array(repeating: .now, count: slots))
  }
}

/// A session of the minimal runtime.
actor MinimalSession {
  /// The session's running effects.
  struct Live {
    var head: MinimalEffect?
    var count = 0
  }

  @TaskLocal static var current: MinimalSession?

  private var state = SessionFeature.State()
  private var lastActive: ContinuousClock.Instant
  private let slot: Int
  private let timers: MinimalTimerQueue
  let live = Mutex(Live())

  init(slot: Int, timers: MinimalTimerQueue) {
    self.slot = slot
    self.timers = timers
    self.lastActive = .now
  }

  /// The reduce: the state, the activity, the idle timer re-armed in the shared queue, and the
  /// `.run` registered before anything can cancel or wait for it.
  func request() -> MinimalEffect {
    let now = ContinuousClock.now
    self.lastActive = now
    self.state.requests += 1
    self.timers.deadlines.withLock { $0[self.slot] = now + .seconds(300) }
    let effect = MinimalEffect(snapshot: self.state)
    self.live.withLock { live in
      effect.next = live.head
      live.head?.previous = effect
      live.head = effect
      live.count += 1
    }
    return effect
  }

  /// The effect's end: out of the list.
  nonisolated func end(_ effect: MinimalEffect) {
    self.live.withLock { live in
      if let previous = effect.previous {
        previous.next = effect.next
      } else {
        live.head = effect.next
      }
      effect.next?.previous = effect.previous
      effect.next = nil
      effect.previous = nil
      live.count -= 1
    }
  }
}

/// Sessions by key, under one lock, as a registry keeps them.
final class MinimalRegistry: Sendable {
  private let sessions: Mutex<[Int: MinimalSession]>

  init(sessions count: Int) {
    let timers = MinimalTimerQueue(slots: count)
    self.sessions = Mutex(
      Dictionary(
        uniqueKeysWithValues: (0..<count).map { ($0, MinimalSession(slot: $0, timers: timers)) }
      )
    )
  }

  /// A session request: the lookup, the reduce on the session's actor, then the `.run` started
  /// on this thread with the session bound.
  func request(_ key: Int) async {
    guard let session = self.sessions.withLock({ $0[key] }) else { return }
    let effect = await session.request()
    // NB: the body as a reducer's `.run` has it: an async closure, run with the session bound.
    let snapshot = effect.snapshot
    let body: @concurrent @Sendable () async -> Void = { persist(snapshot) }
    if #available(macOS 26.0, *) {
      // NB: in a loop, as the library's `EffectStarts.startAll` starts its tasks: the optimizer
      // inlines `Task.immediateDetached` there and folds its `nil` executor preference away; out
      // of line, the task carried a preference record the library's tasks do not.
      for _ in 0..<1 {
        Task.immediateDetached { await Self.run(body, effect, of: session) }
      }
    } else {
      Task.detached { await Self.run(body, effect, of: session) }
    }
  }

  /// The task's body: the effect's body with its session bound, unless cancelled, then its end.
  private static func run(
    _ body: @concurrent @Sendable () async -> Void,
    _ effect: MinimalEffect,
    of session: MinimalSession
  ) async {
    await MinimalSession.$current.withValue(session) {
      let cancelled = session.live.withLock { _ in effect.isCancelled }
      if !cancelled { await body() }
    }
    session.end(effect)
  }
}

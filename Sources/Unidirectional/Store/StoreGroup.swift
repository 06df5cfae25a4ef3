/// Stores shut down together: the stores a server or a command-line tool owns (one per
/// connection, say), stopped with one grace period when the process is asked to stop.
///
/// The group holds its stores weakly: a store released when its connection closed leaves the
/// group by itself.
///
/// ```swift
/// let connections = StoreGroup()
///
/// // For each accepted connection:
/// let store = Store(initialState: Connection.State()) { Connection() }
/// guard connections.insert(store) else { return close(socket) }  // shutting down
///
/// // On SIGINT:
/// let closed = await connections.shutdown(gracePeriod: .seconds(2))
/// print("closed \(closed) connections")
/// ```
public final class StoreGroup: Sendable {
  private struct Member: Sendable {
    weak var store: (any GroupedStore)?
  }

  private struct Members: Sendable {
    var stores: [ObjectIdentifier: Member] = [:]
    var isShuttingDown = false
    /// Past this count, members whose store was released are pruned (amortized O(1)).
    var pruneThreshold = 64
  }

  private let members = LockedBox(Members())

  /// Creates an empty group.
  public init() {}

  /// Adds `store` to the group; `false` (and the store is not added) once the group is shutting
  /// down, so the caller can refuse the work the store was for.
  ///
  /// - Parameter store: A root or scoped store.
  /// - Returns: Whether the store joined the group.
  @discardableResult
  public func insert<State: Sendable, Action: Sendable>(_ store: Store<State, Action>) -> Bool {
    self.members.withLock { members in
      guard !members.isShuttingDown else { return false }
      members.stores[ObjectIdentifier(store)] = Member(store: store)
      if members.stores.count > members.pruneThreshold {
        members.stores = members.stores.filter { $0.value.store != nil }
        members.pruneThreshold = max(64, 2 * members.stores.count)
      }
      return true
    }
  }

  /// Removes `store` from the group (it is not shut down).
  public func remove<State: Sendable, Action: Sendable>(_ store: Store<State, Action>) {
    _ = self.members.withLock { $0.stores.removeValue(forKey: ObjectIdentifier(store)) }
  }

  /// The stores in the group that are still alive.
  public var count: Int {
    self.members.withLock { members in members.stores.values.count { $0.store != nil } }
  }

  /// Whether ``shutdown(gracePeriod:clock:)`` has been called.
  public var isShuttingDown: Bool {
    self.members.withLock { $0.isShuttingDown }
  }

  /// Shuts every store down at once, each with the same grace period
  /// (``Store/shutdown(gracePeriod:clock:)``), and returns when all have; later inserts are
  /// refused.
  ///
  /// Each phase runs for every store before the next: reject new actions, let running effects
  /// finish for up to `gracePeriod`, cancel what is left, give cancelled effects the same grace
  /// (at least a second) to end, and report the ones that ignore it. (With a zero grace period
  /// there is nothing to let finish, so each store is closed and its effects cancelled at once.)
  /// One clock measures each wait for the whole group, so shutting down 100,000 stores costs a
  /// few hops per store, not a task.
  ///
  /// It runs off the caller's actor (`@concurrent`): called on the main actor, as a command-line
  /// tool's signal handling often is, the hops would otherwise each come back to that actor, a
  /// thread wake-up each (9 s instead of 1.8 s for 100,000 stores with ticking timers).
  ///
  /// - Parameters:
  ///   - gracePeriod: How long running effects may take to finish before they are cancelled.
  ///   - clock: The clock the grace period is measured on; the `continuousClock` dependency of
  ///     the group's first store when `nil` (a server's stores share their dependencies).
  /// - Returns: How many stores were shut down.
  @discardableResult @concurrent
  public func shutdown(gracePeriod: Duration, clock: (any Clock<Duration>)? = nil) async -> Int {
    let stores = self.members.withLock { members -> [any GroupedStore] in
      members.isShuttingDown = true
      defer { members.stores = [:] }
      return members.stores.values.compactMap(\.store)
    }
    // 1. Reject new actions everywhere. With no grace period, each store's effects are cancelled
    // in the same visit (phase 3 at once): phase 2 has nothing to wait for, and a second pass over
    // many stores whose memory has gone cold is a large part of the shutdown.
    let cancelsWhileClosing = gracePeriod <= .zero
    var closing: [(store: any GroupedStore, supervisor: EffectSupervisor?, observed: Bool)] = []
    closing.reserveCapacity(stores.count)
    var defaultClock: (any Clock<Duration>)?
    for store in stores {
      guard let phases = await store.closeForGroupShutdown(cancelling: cancelsWhileClosing) else {
        continue
      }
      closing.append((store, phases.supervisor, phases.observed))
      if defaultClock == nil { defaultClock = phases.clock }
    }
    let clock = clock ?? defaultClock ?? ContinuousClock()
    let supervisors = closing.compactMap(\.supervisor)
    // 2. Let running effects finish within the grace period.
    if gracePeriod > .zero && !supervisors.allSatisfy(\.isIdle) {
      _ = await firstToFinish(
        { await Self.waitUntilIdle(supervisors) },
        orAfter: gracePeriod,
        on: clock
      )
    }
    // 3. Cancel the rest, then give them time to end.
    if !cancelsWhileClosing {
      for entry in closing { await entry.store.cancelForGroupShutdown() }
    }
    if !supervisors.allSatisfy(\.isIdle) {
      _ = await firstToFinish(
        { await Self.waitUntilIdle(supervisors) },
        orAfter: max(gracePeriod, RootCore<Int, Int>.cancellationGrace),
        on: clock
      )
    }
    // 4. Finish each store: let go of its effects' way back, or report what ignored cancellation.
    for entry in closing {
      var ended = entry.supervisor?.isIdle ?? true
      if !ended, let supervisor = entry.supervisor, supervisor.liveCount == 0 {
        await supervisor.waitUntilEnded()
        ended = true
      }
      // NB: a store whose effects all ended has let go of its core already (its last effect task
      // did); only an observer still needs to hear of the shutdown. One hop fewer per store.
      guard !ended || entry.observed else { continue }
      await entry.store.completeGroupShutdown(effectsEnded: ended, gracePeriod: gracePeriod)
    }
    return stores.count
  }

  /// Waits for each supervisor in turn (a cancelled wait returns at once, so the loop ends as soon
  /// as the waiting task is cancelled).
  private static func waitUntilIdle(_ supervisors: [EffectSupervisor]) async {
    for supervisor in supervisors {
      await supervisor.waitUntilIdle()
      if Task.isCancelled { return }
    }
  }
}

/// What a group needs of a store it closed.
struct GroupShutdownPhases: Sendable {
  let supervisor: EffectSupervisor?
  let clock: any Clock<Duration>
  /// Whether an observer must hear of the shutdown.
  let observed: Bool
}

/// A store, whatever its state and action (what ``StoreGroup`` needs of it).
protocol GroupedStore: AnyObject, Sendable {
  /// Rejects new actions, and with `cancelling` cancels every effect; `nil` when the store was
  /// already shut down (or shutting down).
  func closeForGroupShutdown(cancelling: Bool) async -> GroupShutdownPhases?
  func cancelForGroupShutdown() async
  func completeGroupShutdown(effectsEnded: Bool, gracePeriod: Duration) async
}

extension Store: GroupedStore {
  func closeForGroupShutdown(cancelling: Bool) -> GroupShutdownPhases? {
    let phases = self.core.phasedShutdown
    guard phases.closeForShutdown() else { return nil }
    if cancelling { phases.cancelForShutdown() }
    return GroupShutdownPhases(
      supervisor: phases.supervisor,
      clock: phases.shutdownClock,
      observed: phases.isObserved
    )
  }

  func cancelForGroupShutdown() {
    self.core.phasedShutdown.cancelForShutdown()
  }

  func completeGroupShutdown(effectsEnded: Bool, gracePeriod: Duration) {
    self.core.phasedShutdown.completeShutdown(effectsEnded: effectsEnded, gracePeriod: gracePeriod)
  }
}

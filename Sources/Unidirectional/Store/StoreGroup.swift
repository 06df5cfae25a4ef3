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
  /// - Parameters:
  ///   - gracePeriod: How long running effects may take to finish before they are cancelled.
  ///   - clock: The clock the grace period is measured on; each store's `continuousClock`
  ///     dependency when `nil`.
  /// - Returns: How many stores were shut down.
  @discardableResult
  public func shutdown(gracePeriod: Duration, clock: (any Clock<Duration>)? = nil) async -> Int {
    let stores = self.members.withLock { members -> [any GroupedStore] in
      members.isShuttingDown = true
      defer { members.stores = [:] }
      return members.stores.values.compactMap(\.store)
    }
    await withDiscardingTaskGroup { group in
      for store in stores {
        group.addTask { await store.shutdownInGroup(gracePeriod: gracePeriod, clock: clock) }
      }
    }
    return stores.count
  }
}

/// A store, whatever its state and action (what ``StoreGroup`` needs of it).
protocol GroupedStore: AnyObject, Sendable {
  func shutdownInGroup(gracePeriod: Duration, clock: (any Clock<Duration>)?) async
}

extension Store: GroupedStore {
  func shutdownInGroup(gracePeriod: Duration, clock: (any Clock<Duration>)?) async {
    await self.shutdown(gracePeriod: gracePeriod, clock: clock)
  }
}

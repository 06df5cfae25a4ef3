/// Watches a ``StoreRegistry`` as a whole (its sessions coming and going, its saves), for
/// metrics: `UnidirectionalServer`'s `SessionMetrics` reports these under the names a
/// Prometheus scrape shows.
///
/// Keys are given as `String(describing:)`. ``liveCountChanged(to:)`` is called under the
/// registry's lock, in the order the changes happened, so a gauge it sets is always the
/// registry's `liveCount`; like every method here it must return quickly and must not call the
/// registry.
public protocol SessionRegistryObserver: Sendable {
  /// A key's store became live (its state loaded, with storage).
  func sessionActivated(key: String)
  /// A live key's store began to passivate (it is no longer live).
  func sessionPassivated(key: String, reason: PassivationReason)
  /// The number of live stores is now `count`.
  func liveCountChanged(to count: Int)
  /// One save of `count` sessions' states ended after `duration`, saved or failed.
  func sessionsSaved(count: Int, duration: Duration)
  /// The storage failed for `key`: loading, saving (refused, or the whole batch) or erasing.
  func storageFailed(key: String)
  /// Another owner holds, or took over, `key`'s lease.
  func ownershipLost(key: String)
  /// A send with an idempotency key the session already held was answered without reducing.
  func idempotentReplay(key: String)
}

extension SessionRegistryObserver {
  /// Does nothing.
  public func sessionActivated(key: String) {}
  /// Does nothing.
  public func sessionPassivated(key: String, reason: PassivationReason) {}
  /// Does nothing.
  public func liveCountChanged(to count: Int) {}
  /// Does nothing.
  public func sessionsSaved(count: Int, duration: Duration) {}
  /// Does nothing.
  public func storageFailed(key: String) {}
  /// Does nothing.
  public func ownershipLost(key: String) {}
  /// Does nothing.
  public func idempotentReplay(key: String) {}
}

/// Why a session's store passivated.
public enum PassivationReason: String, Sendable, Hashable, CaseIterable {
  /// It reduced nothing for the registry's idle timeout.
  case idle
  /// The registry was at capacity and it was the least recently used.
  case capacity
  /// ``StoreRegistry/passivate(_:)`` asked for it, or its store was shut down from outside.
  case explicit
  /// The registry shut down.
  case shutdown
  /// ``StoreRegistry/erase(_:)`` erased it.
  case erased
  /// Its lease was lost or its save failed: it ended without saving.
  case discarded
}

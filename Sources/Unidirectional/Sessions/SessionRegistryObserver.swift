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
  /// Whether this observer returns intervals from the `…Started` methods. `false` (the default)
  /// keeps a registry's sends to live keys on their fastest path, which does not ask.
  var measuresIntervals: Bool { get }
  /// A send to `key` began, on the sending task; the registry ends the interval returned when
  /// the send returns or throws. `nil` (the default) measures nothing, and then `key` is never
  /// formed.
  func sendStarted(key: @autoclosure () -> String) -> (any SessionInterval)?
  /// `key`'s activation began (its lease taken and state loaded, with storage), inside `send`'s
  /// interval when a measured send caused it.
  func activationStarted(
    key: @autoclosure () -> String,
    within send: (any SessionInterval)?
  ) -> (any SessionInterval)?
  /// One save of `states` sessions' states, which `sends` waiting sends share, began.
  func saveStarted(states: Int, sends: Int) -> (any SessionInterval)?
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
  /// `false`: measures nothing.
  public var measuresIntervals: Bool { false }
  /// Measures nothing.
  public func sendStarted(key: @autoclosure () -> String) -> (any SessionInterval)? { nil }
  /// Measures nothing.
  public func activationStarted(
    key: @autoclosure () -> String,
    within send: (any SessionInterval)?
  ) -> (any SessionInterval)? { nil }
  /// Measures nothing.
  public func saveStarted(states: Int, sends: Int) -> (any SessionInterval)? { nil }
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

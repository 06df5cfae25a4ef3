import Metrics
import Unidirectional

/// Reports a `StoreRegistry` as a whole to swift-metrics.
///
/// Under the names API.md lists, which Prometheus renders as written:
///
/// | metric | kind |
/// |---|---|
/// | `unidirectional_sessions_live` | gauge: the registry's `liveCount`, always |
/// | `unidirectional_session_activations_total` | counter |
/// | `unidirectional_session_passivations_total{reason}` | counter: idle, capacity, explicit, shutdown, erased, discarded |
/// | `unidirectional_storage_save_seconds` | timer: each group-commit save |
/// | `unidirectional_storage_batch_size` | histogram: states per save |
/// | `unidirectional_storage_failures_total` | counter |
/// | `unidirectional_ownership_lost_total` | counter |
/// | `unidirectional_idempotent_replays_total` | counter |
///
/// ```swift
/// let carts = StoreRegistry(storage: storage, registryObserver: SessionMetrics()) { ... }
/// ```
///
/// The gauge is set from the count the registry holds, under its lock, at every change: it
/// cannot drift or go negative, however many stores share one observer.
public struct SessionMetrics: SessionRegistryObserver {
  private let live: Gauge
  private let activations: Counter
  private let passivations: [PassivationReason: Counter]
  private let saveDuration: Metrics.Timer
  private let batchSize: Recorder
  private let failures: Counter
  private let ownershipLosses: Counter
  private let replays: Counter

  /// Creates the metrics.
  ///
  /// - Parameters:
  ///   - prefix: The metrics' names' prefix.
  ///   - factory: Where the metrics go (the bootstrapped system's by default).
  public init(
    prefix: String = "unidirectional",
    factory: any MetricsFactory = MetricsSystem.factory
  ) {
    self.live = Gauge(label: "\(prefix)_sessions_live", factory: factory)
    self.activations = Counter(label: "\(prefix)_session_activations_total", factory: factory)
    var passivations: [PassivationReason: Counter] = [:]
    for reason in PassivationReason.allCases {
      passivations[reason] = Counter(
        label: "\(prefix)_session_passivations_total",
        dimensions: [("reason", reason.rawValue)],
        factory: factory
      )
    }
    self.passivations = passivations
    self.saveDuration = Metrics.Timer(
      label: "\(prefix)_storage_save_seconds",
      preferredDisplayUnit: .seconds,
      factory: factory
    )
    self.batchSize = Recorder(
      label: "\(prefix)_storage_batch_size",
      aggregate: true,
      factory: factory
    )
    self.failures = Counter(label: "\(prefix)_storage_failures_total", factory: factory)
    self.ownershipLosses = Counter(label: "\(prefix)_ownership_lost_total", factory: factory)
    self.replays = Counter(label: "\(prefix)_idempotent_replays_total", factory: factory)
    self.live.record(0)
  }

  /// Counts the activation.
  public func sessionActivated(key: String) { self.activations.increment() }

  /// Counts the passivation by its reason.
  public func sessionPassivated(key: String, reason: PassivationReason) {
    self.passivations[reason]?.increment()
  }

  /// Sets the live gauge.
  public func liveCountChanged(to count: Int) { self.live.record(count) }

  /// Records the save's duration and size.
  public func sessionsSaved(count: Int, duration: Duration) {
    self.saveDuration.record(duration: duration)
    self.batchSize.record(count)
  }

  /// Counts the failure.
  public func storageFailed(key: String) { self.failures.increment() }

  /// Counts the loss.
  public func ownershipLost(key: String) { self.ownershipLosses.increment() }

  /// Counts the replay.
  public func idempotentReplay(key: String) { self.replays.increment() }
}

/// The throttle state of one store, per identifier (``Effect/throttle(id:for:clock:latest:)``).
///
/// An entry whose interval passed with nothing held back is the same as none. Past twice the
/// entries left by the last sweep (and ``minimumSweep``), those are dropped: O(1) amortized.
struct ThrottleTable: Sendable {
  /// The fewest entries at which expired ones are swept.
  static var minimumSweep: Int { 64 }

  private var entries: [CancelKey: ThrottleState] = [:]
  private var sweepThreshold = Self.minimumSweep

  /// Identifiers with throttle state.
  var count: Int { self.entries.count }

  /// Reads and updates the throttle state of `key`.
  mutating func withState<R>(for key: CancelKey, _ body: (inout ThrottleState) -> R) -> R {
    var state = self.entries[key] ?? ThrottleState(lastRun: (), isHolding: false)
    defer {
      self.entries[key] = state
      if self.entries.count > self.sweepThreshold {
        self.entries = self.entries.filter { !$0.value.isExpired }
        self.sweepThreshold = max(Self.minimumSweep, 2 * self.entries.count)
      }
    }
    return body(&state)
  }
}

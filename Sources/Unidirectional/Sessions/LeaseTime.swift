/// The time a registry renews its leases on and counts them against.
///
/// The registry's clock, so that a test advancing a ``TestClock`` renews and expires leases as it
/// fires idle timers. An ``ImmediateClock`` measures no time: its sleeps return at once, so a
/// renewal loop paced by it would never suspend, and would hold a thread of the cooperative pool
/// for as long as the registry lives (two such registries stop every task of a two-core machine).
/// A registry on one keeps its leases on the continuous clock instead, the time a database's
/// leases run on.
struct LeaseTime: Sendable {
  /// The clock renewals sleep on.
  let clock: any Clock<Duration>
  /// The registry clock's timeline; `nil` when leases are kept on the continuous clock.
  private let host: (any TimerHost)?
  private let origin = ContinuousClock.now

  init(registryClock: any Clock<Duration>, host: any TimerHost) {
    if registryClock is ImmediateClock {
      self.clock = ContinuousClock()
      self.host = nil
    } else {
      self.clock = registryClock
      self.host = host
    }
  }

  /// Now, in nanoseconds on the lease timeline (what `Entry.leaseHeldUntil` is compared with).
  var nowNanoseconds: Int64 {
    if let host { return host.nowNanoseconds }
    let (seconds, attoseconds) = self.origin.duration(to: .now).components
    return seconds * 1_000_000_000 + attoseconds / 1_000_000_000
  }
}

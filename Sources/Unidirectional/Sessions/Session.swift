import Synchronization

/// What every reduce of a session's store records, without a lock: when it last reduced an action
/// (its idle period), how recently among all sessions (least-recently-used order), and how many
/// actions it has reduced (the version a save carries).
@usableFromInline final class SessionActivity: Sendable {
  private let lastActiveNanoseconds: Atomic<Int64>
  private let stamp = Atomic<UInt64>(0)
  private let count = Atomic<UInt64>(0)
  private let clock: SessionClock
  /// The idempotency keys of the sends this session's state includes.
  ///
  /// Written right after the action a key came with is reduced, before any other action, so a
  /// snapshot taken with the state (on the store's executor) always matches it.
  private let window = LockedBox(IdempotencyWindow())

  init(clock: SessionClock) {
    self.clock = clock
    self.lastActiveNanoseconds = Atomic(clock.host.nowNanoseconds)
    if clock.tracksRecency { self.stamp.store(clock.nextStamp(), ordering: .relaxed) }
  }

  /// The store is about to reduce an action.
  @usableFromInline func touch() {
    let clock = self.clock
    self.lastActiveNanoseconds.store(clock.host.nowNanoseconds, ordering: .relaxed)
    if clock.tracksRecency { self.stamp.store(clock.nextStamp(), ordering: .relaxed) }
    // NB: a load and a store, not an atomic add: only the store's reduces write the count, one at
    // a time. The add compiled to a compare-and-swap loop.
    self.count.store(self.count.load(ordering: .relaxed) &+ 1, ordering: .relaxed)
  }

  /// When the store last reduced an action, on the timer host's timeline.
  var lastActive: Duration {
    .nanoseconds(self.lastActiveNanoseconds.load(ordering: .relaxed))
  }

  /// Orders sessions by their latest action (greater: more recent).
  var recency: UInt64 {
    self.stamp.load(ordering: .relaxed)
  }

  /// The number of actions reduced (read on the store's executor right after an action).
  var version: UInt64 {
    self.count.load(ordering: .relaxed)
  }

  /// The idempotency window the state includes, and how many keys it took since activation
  /// (its version: a save writes the window only when that changed).
  var idempotency: (record: IdempotencyRecord, version: UInt64) {
    self.window.withLock { ($0.record, $0.version) }
  }

  /// Starts the window from the record stored with the loaded state (version 0: as stored).
  func restore(_ record: IdempotencyRecord, capacity: Int) {
    self.window.withLock { window in
      for (index, digest) in record.digests.enumerated() {
        let fingerprint = record.fingerprints.isEmpty ? 0 : record.fingerprints[index]
        window.insert(digest, fingerprint: fingerprint, capacity: capacity)
      }
      window.version = 0
    }
  }

  /// Whether the state includes the send that came with `key`: the fingerprint of its request
  /// (0 when it came without one), or `nil` when it does not.
  func fingerprint(ofIdempotencyKey key: String) -> UInt32? {
    let digest = IdempotencyRecord.digest(of: key)
    return self.window.withLock { $0.members[digest] }
  }

  /// Records that the state now includes the send that came with `key` (and a request whose
  /// fingerprint is `fingerprint`, 0 for none); returns the window.
  func record(
    idempotencyKey key: String,
    fingerprint: UInt32,
    capacity: Int
  ) -> (record: IdempotencyRecord, version: UInt64) {
    let digest = IdempotencyRecord.digest(of: key)
    return self.window.withLock { window in
      window.insert(digest, fingerprint: fingerprint, capacity: capacity)
      return (window.record, window.version)
    }
  }
}

/// A session's last idempotency keys, by digest: the newest `capacity` of them, in order, and as
/// a map to the fingerprints of the requests they came with (0: none).
struct IdempotencyWindow: Sendable {
  var order: [UInt64] = []
  /// The fingerprints of `order`'s keys, in its order (0: none).
  var fingerprints: [UInt32] = []
  var members: [UInt64: UInt32] = [:]
  /// Keys taken since activation.
  var version: UInt64 = 0

  mutating func insert(_ digest: UInt64, fingerprint: UInt32, capacity: Int) {
    guard self.members[digest] == nil else { return }
    self.members[digest] = fingerprint
    self.version &+= 1
    self.order.append(digest)
    self.fingerprints.append(fingerprint)
    let excess = self.order.count - capacity
    guard excess > 0 else { return }
    for old in self.order.prefix(excess) { self.members.removeValue(forKey: old) }
    self.order.removeFirst(excess)
    self.fingerprints.removeFirst(excess)
  }

  /// The window as storage keeps it (with no fingerprints if none is set).
  var record: IdempotencyRecord {
    IdempotencyRecord(digests: self.order, fingerprints: self.fingerprints)
  }
}

/// A registry's time: the host its idle timers wait on, and the recency counter of its sessions.
///
/// NB: only a registry with a capacity orders its sessions by recency (it evicts the least
/// recently used). Without one, no reduce touches the shared counter: every session's reduce
/// wrote it, and under load on two cores its cache line (with `host`, read by every reduce too)
/// moved between them on every request.
final class SessionClock: Sendable {
  let host: any TimerHost
  /// Whether sessions take recency stamps (the registry has a capacity).
  let tracksRecency: Bool
  private let stamps = Atomic<UInt64>(0)

  init(host: any TimerHost, tracksRecency: Bool) {
    self.host = host
    self.tracksRecency = tracksRecency
  }

  func nextStamp() -> UInt64 {
    self.stamps.add(1, ordering: .relaxed).newValue
  }
}

/// The reducer of a registry's store: the feature's, recording each action's activity first.
@usableFromInline
struct SessionReducer<Base: Reducer>: Reducer where Base.State: Sendable {
  @usableFromInline let base: Base
  @usableFromInline let activity: SessionActivity

  @inlinable
  init(base: Base, activity: SessionActivity) {
    self.base = base
    self.activity = activity
  }

  @inlinable
  func reduce(into state: inout Base.State, action: Base.Action) -> Effect<Base.Action> {
    self.activity.touch()
    return self.base.reduce(into: &state, action: action)
  }
}

extension Duration {
  /// The duration in whole nanoseconds (saturating).
  var nanoseconds: Int64 {
    let (seconds, attoseconds) = self.components
    let (scaled, overflow) = seconds.multipliedReportingOverflow(by: 1_000_000_000)
    if overflow { return seconds < 0 ? .min : .max }
    return scaled &+ attoseconds / 1_000_000_000
  }
}

/// Where a ``StoreRegistry`` keeps its sessions' state, and who owns each session.
///
/// A backend stores one row per key: the state, and a lease (its owner, its expiry, and a fencing
/// token that grows with every acquisition). The registry takes a key's lease and loads its state
/// when it activates the key, saves the states of many keys in one call (group commit), renews
/// its leases in the background, and releases a lease when it passivates the key.
///
/// The rules every backend keeps:
/// - ``acquire(_:owner:)`` grants the lease when it is free, expired, or already `owner`'s, with a
///   token no earlier lease of that key had: one greater than the row's last, and a random one
///   (``firstLeaseToken()``) for a row made afresh, a key never stored or erased (saves compare
///   tokens for equality). Otherwise it names the current owner.
/// - ``save(_:owner:)`` writes a state only if its token is still the key's current one, checked in
///   the same step that writes (a stale owner never overwrites a newer one). It stores each
///   write's idempotency record with its state, in the same write (and keeps the stored one when
///   the write carries none). A write the backend cannot take
///   (too large, a value it refuses) is ``SessionSaveResult/refused(reason:)`` on its own: the
///   rest of the batch is saved.
/// - ``load(_:)`` and a read of a key never saved write nothing.
/// - ``erase(_:token:owner:)`` removes a key's row under the same fencing as a save.
/// - A stored state that cannot be read (a newer version, or one that no longer decodes) makes
///   ``acquire(_:owner:)`` and ``load(_:)`` throw ``SessionStateUnreadable`` and is left as it is.
/// - Expiry is measured on the storage's own time (the database server's clock), so registries on
///   different machines agree.
/// - ``renew(_:owner:)`` extends at least the leases it is given. A backend may instead keep every
///   lease of an owner while that owner renews (its liveness: one write however many keys it
///   holds, as PostgreSQL's does); then a lease its owner stops using without releasing stays
///   the owner's, and the owner takes it again when asked, until the owner stops.
///
/// The core ships ``InMemorySessionStorage`` for tests; the companion package has SQLite and
/// PostgreSQL backends. Anyone can write another.
public protocol SessionStorage<Key, State>: Sendable {
  /// The sessions' key.
  associatedtype Key: Hashable & Sendable
  /// The sessions' state.
  associatedtype State: Sendable

  /// How long a lease lasts without renewal. Registries renew every third of it.
  var leaseDuration: Duration { get }

  /// How many saves a registry may have in flight at once, each with its own batch (a key is in
  /// one at most). By default 1: every state that waits while a save is in flight goes into the
  /// next one. A network database overlaps round trips with a few more.
  var concurrentSaves: Int { get }

  /// How many leases a registry hands to one call of ``renew(_:owner:)``; each call's are
  /// counted from when it was asked for. By default 5,000: a backend that writes a row per lease
  /// renews that many well within a lease even under load, where one call for a hundred
  /// thousand would not. A backend that keeps an owner's leases by its liveness renews them all
  /// in its call's first write, and takes them all at once.
  var leasesPerRenewal: Int { get }

  /// Takes `key`'s lease for `owner`, recording the address `owner` is reached at, and loads
  /// its stored state.
  ///
  /// - Returns: The lease's fencing token, the stored state (`nil` for a key never saved) and its
  ///   idempotency record, or the owner that holds the lease, with its address and time left.
  /// - Throws: When the storage fails; ``SessionStateUnreadable`` when the stored state cannot be
  ///   read (it is left as is).
  func acquire(
    _ key: Key,
    owner: String,
    address: String?
  ) async throws
    -> SessionAcquisition<State>

  /// Reads `key`'s stored state without taking its lease, and writes nothing.
  ///
  /// - Returns: The stored state; `nil` for a key never saved (or erased).
  /// - Throws: When the storage fails; ``SessionStateUnreadable`` when the stored state cannot be
  ///   read.
  func load(_ key: Key) async throws -> State?

  /// Removes `key`'s row (its state, its idempotency record and its lease) for good.
  ///
  /// - Parameters:
  ///   - key: The session's key.
  ///   - token: The fencing token of `owner`'s lease on the key, or `nil` when `owner` holds
  ///     none: then the row goes only if no other owner holds an unexpired lease.
  ///   - owner: The erasing registry's owner name.
  /// - Returns: ``SessionSaveResult/saved`` once the row is gone (also for a key never saved), or
  ///   ``SessionSaveResult/staleToken(currentOwner:)`` when another owner holds the lease.
  /// - Throws: When the storage fails; then nothing was erased.
  func erase(_ key: Key, token: UInt64?, owner: String) async throws -> SessionSaveResult

  /// Saves the states of several keys, each under its lease's token, as one write.
  ///
  /// - Returns: One result per write, in order: saved, or refused because the token is stale.
  /// - Throws: When the storage fails; then nothing of the batch is known to be saved.
  func save(
    _ writes: [SessionWrite<Key, State>],
    owner: String
  ) async throws
    -> [SessionSaveResult]

  /// Saves the batch `take` returns, taking it only when the write can begin.
  ///
  /// A registry calls this, not ``save(_:owner:)``: a backend that writes one batch at a time
  /// (one writer, as SQLite has) calls `take` once that writer is its, so every state that
  /// arrived while the write before it ran goes into this one, instead of waiting behind a batch
  /// taken early. The default takes the batch at once and calls ``save(_:owner:)``.
  ///
  /// - Parameters:
  ///   - owner: The saving registry's owner name.
  ///   - take: Returns the writes to save; call it once, before writing. An empty batch is saved
  ///     by writing nothing.
  /// - Returns: One result per write `take` returned, in order.
  /// - Throws: When the storage fails; then nothing of the batch is known to be saved.
  func save(
    owner: String,
    taking take: @Sendable () -> [SessionWrite<Key, State>]
  ) async throws
    -> [SessionSaveResult]

  /// Extends `owner`'s leases: at least `leases`, or every one `owner` holds.
  ///
  /// - Returns: The keys of `leases` whose lease `owner` no longer holds (another owner took it
  ///   over, or another activation under `owner`'s name).
  func renew(_ leases: [SessionLease<Key>], owner: String) async throws -> [Key]

  /// Gives up `owner`'s leases, so another owner may take the keys at once.
  func release(_ leases: [SessionLease<Key>], owner: String) async throws
}

extension SessionStorage {
  /// One save in flight at a time.
  public var concurrentSaves: Int { 1 }

  /// 5,000 leases to a renewal.
  public var leasesPerRenewal: Int { 5_000 }

  /// Takes the batch at once and saves it with ``save(_:owner:)``.
  public func save(
    owner: String,
    taking take: @Sendable () -> [SessionWrite<Key, State>]
  ) async throws
    -> [SessionSaveResult]
  {
    let writes = take()
    guard !writes.isEmpty else { return [] }
    return try await self.save(writes, owner: owner)
  }

  /// Takes `key`'s lease for `owner`, recording no address, and loads its state.
  public func acquire(_ key: Key, owner: String) async throws -> SessionAcquisition<State> {
    try await self.acquire(key, owner: owner, address: nil)
  }

  /// The fencing token of the first lease of a row made afresh: random, from 1 to 2^62.
  ///
  /// An erased row takes its tokens with it. Were a new row's tokens to start at 1 again, a store
  /// still live from before the erasure (a paused process, an instance under the same owner name)
  /// could hold the very token the new lease gets, and save its old state over the new one. A
  /// random start repeats no earlier token but by a chance of about one in 2^62, and leaves the
  /// row's later leases, each one greater, room to grow.
  public static func firstLeaseToken() -> UInt64 {
    UInt64.random(in: 1...(1 << 62))
  }
}

/// The outcome of ``SessionStorage/acquire(_:owner:)``.
public enum SessionAcquisition<State: Sendable>: Sendable {
  /// The lease is the caller's, under this fencing token; the key's stored state, if any, and
  /// the idempotency record saved with it.
  case acquired(token: UInt64, state: State?, idempotency: IdempotencyRecord = IdempotencyRecord())
  /// Another owner holds an unexpired lease: its name, the address it advertised (if any) and
  /// how long its lease has left (if the backend knows).
  case heldBy(owner: String, address: String? = nil, expiresIn: Duration? = nil)

  /// The stored state, when the lease was acquired.
  public var state: State? {
    if case .acquired(_, let state, _) = self { return state }
    return nil
  }

  /// The owner holding the lease, when it was not acquired.
  public var holder: String? {
    if case .heldBy(let owner, _, _) = self { return owner }
    return nil
  }
}

/// A key's state to save, under the fencing token of the lease it was acquired with.
public struct SessionWrite<Key: Hashable & Sendable, State: Sendable>: Sendable {
  /// The session's key.
  public var key: Key
  /// The state to store.
  public var state: State
  /// The fencing token of the writer's lease.
  public var token: UInt64
  /// The idempotency record of the sends this state includes, to store with the state in the
  /// same write; `nil` when it has not changed since this lease last wrote it (keep the stored
  /// one).
  public var idempotency: IdempotencyRecord?

  /// Creates a write.
  public init(key: Key, state: State, token: UInt64, idempotency: IdempotencyRecord? = nil) {
    self.key = key
    self.state = state
    self.token = token
    self.idempotency = idempotency
  }
}

/// A key's lease, by its fencing token.
public struct SessionLease<Key: Hashable & Sendable>: Sendable, Hashable {
  /// The session's key.
  public var key: Key
  /// The lease's fencing token.
  public var token: UInt64

  /// Creates a lease.
  public init(key: Key, token: UInt64) {
    self.key = key
    self.token = token
  }
}

/// The outcome of one write of ``SessionStorage/save(_:owner:)``.
public enum SessionSaveResult: Sendable, Hashable {
  /// The state is stored (durably, for a durable backend).
  case saved
  /// The write's token is no longer the key's: another owner took the lease (named when known).
  case staleToken(currentOwner: String?)
  /// The backend cannot store this state (past its size limit, a value it refuses); the rest of
  /// the batch is saved. The reason names what was wrong, not the state.
  case refused(reason: String)
}

/// A stored state that a backend cannot read.
///
/// It was stored by a newer version of the app, or it no longer decodes or migrates. The stored
/// bytes are left as they are.
public struct SessionStateUnreadable: Error, Sendable, Hashable, CustomStringConvertible {
  /// The session's key, as `String(describing:)`.
  public var key: String
  /// The state version the row was stored at, when the backend records one.
  public var storedVersion: Int?
  /// Why it cannot be read.
  public var reason: String

  /// Creates the error.
  public init(key: String, storedVersion: Int?, reason: String) {
    self.key = key
    self.storedVersion = storedVersion
    self.reason = reason
  }

  /// Names the key, the stored version and the reason.
  public var description: String {
    let version = self.storedVersion.map { " (stored at state version \($0))" } ?? ""
    return
      "the stored state of '\(self.key)'\(version) cannot be read: \(self.reason); it was left as it is"
  }
}

/// A ``SessionStorage`` in memory, for tests.
///
/// Registries sharing one instance behave as server instances sharing one database: a key is live
/// in at most one of them, a lease expires on the storage's `clock` (pass the ``TestClock`` the
/// registries use to make expiry exact), and a save with a stale fencing token is refused.
///
/// ```swift
/// let clock = TestClock()
/// let storage = InMemorySessionStorage<String, Cart.State>(clock: clock)
/// let a = StoreRegistry(storage: storage, owner: "a", clock: clock) { Cart.State(customer: $0) }
///   reducer: { Cart() }
/// ```
///
/// It also lets a test look inside (``storedState(for:)``, ``owner(of:)``, ``saveCount``) and
/// break it (``failOperations(with:)``, ``makeUnreadable(_:)``, ``refuseSaves(of:reason:)``).
public final class InMemorySessionStorage<Key: Hashable & Sendable, State: Sendable>: SessionStorage
{
  private struct Row: Sendable {
    var state: State?
    var owner: String?
    var address: String?
    var expiry: Duration = .zero
    var token: UInt64 = InMemorySessionStorage.firstLeaseToken()
    var idempotency = IdempotencyRecord()
    var isUnreadable = false
    /// Why saves of this key are refused (a test's stand-in for a value the database refuses).
    var refusal: String?
  }

  private struct Contents: Sendable {
    var rows: [Key: Row] = [:]
    var saveCount = 0
    var writeCount = 0
    var failure: (any Error)?
  }

  /// How long a lease lasts without renewal.
  public let leaseDuration: Duration
  private let now: @Sendable () -> Duration
  private let contents = LockedBox(Contents())

  /// Creates an empty storage.
  ///
  /// - Parameters:
  ///   - clock: The storage's time, on which leases expire.
  ///   - leaseDuration: How long a lease lasts without renewal.
  public init(
    clock: any Clock<Duration> = ContinuousClock(),
    leaseDuration: Duration = .seconds(10)
  ) {
    precondition(
      leaseDuration > .zero,
      "InMemorySessionStorage(leaseDuration: \(leaseDuration)): the lease duration must be positive."
    )
    self.leaseDuration = leaseDuration
    self.now = makeOffsetReader(clock)
  }

  /// Takes `key`'s lease for `owner` (recording its address) and loads its state.
  public func acquire(
    _ key: Key,
    owner: String,
    address: String?
  ) async throws -> SessionAcquisition<State> {
    let now = self.now()
    return try self.contents.withLock { contents in
      if let failure = contents.failure { throw failure }
      var row = contents.rows[key] ?? Row()
      if let current = row.owner, current != owner, row.expiry > now {
        return .heldBy(owner: current, address: row.address, expiresIn: row.expiry - now)
      }
      if row.isUnreadable { throw Self.unreadable(key) }
      // Every acquisition is a new lease, the same owner's too: two registries under one owner
      // name then refuse each other's saves instead of writing over them.
      row.token += 1
      row.owner = owner
      row.address = address
      row.expiry = now + self.leaseDuration
      contents.rows[key] = row
      return .acquired(token: row.token, state: row.state, idempotency: row.idempotency)
    }
  }

  /// Reads `key`'s stored state; writes nothing.
  public func load(_ key: Key) async throws -> State? {
    try self.contents.withLock { contents in
      if let failure = contents.failure { throw failure }
      guard let row = contents.rows[key] else { return nil }
      if row.isUnreadable { throw Self.unreadable(key) }
      return row.state
    }
  }

  /// Removes `key`'s row if `owner` holds its lease under `token` (or, with no token, if nobody
  /// else holds an unexpired one).
  public func erase(_ key: Key, token: UInt64?, owner: String) async throws -> SessionSaveResult {
    let now = self.now()
    return try self.contents.withLock { contents in
      if let failure = contents.failure { throw failure }
      guard let row = contents.rows[key] else { return .saved }
      let mine: Bool
      if let token {
        mine = row.token == token && row.owner == owner
      } else {
        mine = row.owner == nil || row.owner == owner || row.expiry <= now
      }
      guard mine else { return .staleToken(currentOwner: row.owner) }
      contents.rows.removeValue(forKey: key)
      return .saved
    }
  }

  private static func unreadable(_ key: Key) -> SessionStateUnreadable {
    SessionStateUnreadable(key: "\(key)", storedVersion: nil, reason: "it no longer decodes")
  }

  /// Saves the states whose tokens are current.
  public func save(
    _ writes: [SessionWrite<Key, State>],
    owner: String
  ) async throws
    -> [SessionSaveResult]
  {
    try self.contents.withLock { contents in
      if let failure = contents.failure { throw failure }
      contents.saveCount += 1
      return writes.map { write in
        guard var row = contents.rows[write.key], row.token == write.token, row.owner == owner
        else {
          return .staleToken(currentOwner: contents.rows[write.key]?.owner)
        }
        if let refusal = row.refusal { return .refused(reason: refusal) }
        row.state = write.state
        if let idempotency = write.idempotency { row.idempotency = idempotency }
        contents.rows[write.key] = row
        contents.writeCount += 1
        return .saved
      }
    }
  }

  /// Extends the leases `owner` still holds.
  public func renew(_ leases: [SessionLease<Key>], owner: String) async throws -> [Key] {
    let now = self.now()
    return try self.contents.withLock { contents in
      if let failure = contents.failure { throw failure }
      var lost: [Key] = []
      for lease in leases {
        guard var row = contents.rows[lease.key], row.token == lease.token, row.owner == owner
        else {
          lost.append(lease.key)
          continue
        }
        row.expiry = now + self.leaseDuration
        contents.rows[lease.key] = row
      }
      return lost
    }
  }

  /// Gives up the leases `owner` still holds.
  public func release(_ leases: [SessionLease<Key>], owner: String) async throws {
    try self.contents.withLock { contents in
      if let failure = contents.failure { throw failure }
      for lease in leases {
        guard var row = contents.rows[lease.key], row.token == lease.token, row.owner == owner
        else { continue }
        // NB: a key never saved leaves no row behind (a read or a failed first send wrote none).
        guard row.state != nil || row.isUnreadable else {
          contents.rows.removeValue(forKey: lease.key)
          continue
        }
        row.owner = nil
        row.address = nil
        row.expiry = .zero
        contents.rows[lease.key] = row
      }
    }
  }

  // MARK: - Looking inside, for tests

  /// The state stored for `key`, if any.
  public func storedState(for key: Key) -> State? {
    self.contents.withLock { $0.rows[key]?.state }
  }

  /// The owner of `key`'s lease, if it is held and has not expired.
  public func owner(of key: Key) -> String? {
    let now = self.now()
    return self.contents.withLock { contents in
      guard let row = contents.rows[key], let owner = row.owner, row.expiry > now else {
        return nil
      }
      return owner
    }
  }

  /// The idempotency record stored with `key`'s state.
  public func storedIdempotency(for key: Key) -> IdempotencyRecord {
    self.contents.withLock { $0.rows[key]?.idempotency ?? IdempotencyRecord() }
  }

  /// Whether `key` has a row at all (a state or a lease).
  public func hasRow(for key: Key) -> Bool {
    self.contents.withLock { $0.rows[key] != nil }
  }

  /// The fencing token of `key`'s latest lease (0 if it was never taken).
  public func token(of key: Key) -> UInt64 {
    self.contents.withLock { $0.rows[key]?.token ?? 0 }
  }

  /// How many times ``save(_:owner:)`` was called: with group commit, fewer than the sends.
  public var saveCount: Int {
    self.contents.withLock { $0.saveCount }
  }

  /// How many states were written, over every save.
  public var writeCount: Int {
    self.contents.withLock { $0.writeCount }
  }

  /// Makes every operation throw `error` from now on (a database that went down), or work again
  /// (`nil`).
  public func failOperations(with error: (any Error)?) {
    self.contents.withLock { $0.failure = error }
  }

  /// Makes `key`'s stored state unreadable (as if it no longer decoded): acquiring or loading it
  /// throws ``SessionStateUnreadable``, and the stored state is left as it is.
  public func makeUnreadable(_ key: Key) {
    self.contents.withLock { contents in
      var row = contents.rows[key] ?? Row()
      row.isUnreadable = true
      contents.rows[key] = row
    }
  }

  /// Refuses every later save of `key` with `reason`, or takes them again (`nil`).
  ///
  /// As a database refuses a value past its limits: other keys of the same batch are saved.
  public func refuseSaves(of key: Key, reason: String?) {
    self.contents.withLock { contents in
      var row = contents.rows[key] ?? Row()
      row.refusal = reason
      contents.rows[key] = row
    }
  }

  /// Stores `state` for `key` as if a registry had saved it.
  public func store(_ state: State, for key: Key) {
    self.contents.withLock { contents in
      var row = contents.rows[key] ?? Row()
      row.state = state
      contents.rows[key] = row
    }
  }
}

/// Reads `clock`'s time as an offset from now.
func makeOffsetReader<C: Clock>(_ clock: C) -> @Sendable () -> Duration
where C.Duration == Duration {
  let origin = clock.now
  return { origin.duration(to: clock.now) }
}

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
/// break it (``failOperations(with:)``, ``makeUnreadable(_:)``).
public final class InMemorySessionStorage<Key: Hashable & Sendable, State: Sendable>: SessionStorage
{
  private struct Row: Sendable {
    var state: State?
    var owner: String?
    var expiry: Duration = .zero
    var token: UInt64 = 0
    var isUnreadable = false
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

  /// Takes `key`'s lease for `owner` and loads its state.
  public func acquire(_ key: Key, owner: String) async throws -> SessionAcquisition<State> {
    let now = self.now()
    return try self.contents.withLock { contents in
      if let failure = contents.failure { throw failure }
      var row = contents.rows[key] ?? Row()
      if let current = row.owner, current != owner, row.expiry > now {
        return .heldBy(owner: current)
      }
      if row.isUnreadable {
        throw UnreadableState(key: "\(key)")
      }
      if row.owner != owner || row.expiry <= now {
        row.token += 1
      }
      row.owner = owner
      row.expiry = now + self.leaseDuration
      contents.rows[key] = row
      return .acquired(token: row.token, state: row.state)
    }
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
        row.state = write.state
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
        row.owner = nil
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

  /// Makes `key`'s stored state unreadable (as if it no longer decoded): acquiring it throws, and
  /// the stored state is left as it is.
  public func makeUnreadable(_ key: Key) {
    self.contents.withLock { contents in
      var row = contents.rows[key] ?? Row()
      row.isUnreadable = true
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

  /// A stored state that does not read back, with the key it belongs to.
  public struct UnreadableState: Error, CustomStringConvertible {
    /// The key, as `String(describing:)`.
    public let key: String
    /// Names the key.
    public var description: String {
      "the stored state of '\(self.key)' cannot be read (it no longer decodes); it was left as is"
    }
  }
}

/// Reads `clock`'s time as an offset from now.
func makeOffsetReader<C: Clock>(_ clock: C) -> @Sendable () -> Duration
where C.Duration == Duration {
  let origin = clock.now
  return { origin.duration(to: clock.now) }
}

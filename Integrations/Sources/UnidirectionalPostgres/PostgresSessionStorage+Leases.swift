import PostgresNIO
import Unidirectional

extension PostgresSessionStorage {
  /// The table's lock taken alone, for a release.
  ///
  /// It waits up to a second (or ``lockWait``) for the saves that hold the lock to end, then
  /// ``leaseRowWaitSetting`` for the rows: a row that stays locked is someone else's transaction's.
  /// While this statement waits, every save waits behind it; past either wait, the leases go one
  /// at a time.
  ///
  /// NB: nested subqueries, each of volatile functions, so PostgreSQL neither merges nor drops
  /// them: the inner one runs first. Literal SQL: the lock's name is made of the table's (a
  /// checked identifier).
  var exclusiveGate: String {
    """
    SELECT \(self.leaseRowWaitSetting), locked.done
    FROM (
      SELECT pg_advisory_xact_lock(hashtext('\(self.rowsLock)')) AS done
      FROM (SELECT \(self.leaseGateWaitSetting)) AS settings
    ) AS locked
    """
  }

  /// The table where the owners' liveness is kept: the session table's name and `_owners`.
  ///
  /// One row per owner, with the time until which that owner is alive (``renew(_:owner:)`` moves
  /// it on). It is made with the session table, by the same role, so it needs no other grant.
  public var ownersTable: String { self.table + "_owners" }

  /// Whether the lease of the row `t` has lapsed.
  ///
  /// Lapsed: its row's expiry (set when it was taken) is past and its owner is no longer alive.
  /// A free lease, or one of the taker's own, is taken whether or not it has lapsed.
  ///
  /// Literal SQL: the tables' names are checked identifiers.
  var leaseHasLapsed: String {
    """
    (t.lease_expires_at <= now() AND NOT EXISTS (
      SELECT FROM \(self.ownersTable) AS o WHERE o.owner = t.owner AND o.alive_until > now()))
    """
  }

  /// Until when the lease of the row `t` holds.
  ///
  /// The later of its row's expiry and its owner's liveness. Literal SQL, as ``leaseHasLapsed``.
  var leaseHoldsUntil: String {
    """
    greatest(t.lease_expires_at, (
      SELECT o.alive_until FROM \(self.ownersTable) AS o WHERE o.owner = t.owner))
    """
  }

  /// Extends every lease `owner` holds by marking `owner` alive, then reports which of `leases`
  /// it no longer holds, reading them a ``renewalChunk`` to a statement, the statements at once.
  ///
  /// A lease holds while its row's expiry (set when it is taken) is ahead or its owner is alive,
  /// so a renewal writes one row however many keys the owner has: renewing each row rewrote
  /// every live session's row each third of a lease, and an instance with very many live keys
  /// under load could not renew them in time. Nobody takes a key while its owner is alive, so
  /// the keys lost are those taken while it was not (its renewals late by a whole lease) or by
  /// an instance under its name; the reads come after the mark, so they see every one taken
  /// before it.
  public func renew(_ leases: [SessionLease<Key>], owner: String) async throws -> [Key] {
    let lease = self.leaseMilliseconds
    do {
      // NB: an owner alive for none of the last day is forgotten (a restarted instance has a new
      // name by default); a name forgotten is a name not alive, as it was.
      try await self.query(
        """
        WITH settings AS (SELECT \(unescaped: self.lockWaitSetting)),
        forgotten AS (
          DELETE FROM \(unescaped: self.ownersTable)
          WHERE alive_until < now() - interval '1 day' AND owner <> \(owner)
            AND EXISTS (SELECT FROM settings)
        )
        INSERT INTO \(unescaped: self.ownersTable) AS o (owner, alive_until)
        SELECT \(owner), now() + \(lease) * interval '1 millisecond' FROM settings
        ON CONFLICT (owner) DO UPDATE SET alive_until = greatest(o.alive_until, excluded.alive_until)
        """
      )
      // NB: the reads at once: one after another, each waited for a connection behind the
      // requests queued for the pool, and a busy instance's renewal took longer than a lease.
      return try await withThrowingTaskGroup(of: [Key].self) { group in
        for start in stride(from: 0, to: leases.count, by: Self.renewalChunk) {
          let chunk = Array(leases[start..<min(start + Self.renewalChunk, leases.count)])
          group.addTask { try await self.lost(of: chunk, owner: owner) }
        }
        return try await group.reduce(into: []) { $0 += $1 }
      }
    } catch let error as PostgresSessionStorageError {
      throw error
    } catch {
      throw PostgresSessionStorageError.databaseUnavailable(describing(error))
    }
  }

  /// The keys of `leases` whose rows `owner` no longer holds under their tokens; writes nothing.
  private func lost(of leases: [SessionLease<Key>], owner: String) async throws -> [Key] {
    var byText: [String: Key] = [:]
    var keys: [String] = []
    for lease in leases {
      let text = try self.text(lease.key)
      byText[text] = lease.key
      keys.append(text)
    }
    let tokens = leases.map { Int64(bitPattern: $0.token) }
    let rows = try await self.query(
      """
      SELECT v.key FROM UNNEST(\(keys)::text[], \(tokens)::int8[]) AS v(key, token)
      WHERE NOT EXISTS (
        SELECT FROM \(unescaped: self.table) AS t
        WHERE t.key = v.key AND t.token = v.token AND t.owner = \(owner))
      """
    )
    return try rows.decoded(String.self).compactMap { byText[$0] }
  }

  /// How many leases one of a renewal's reads checks.
  public static var renewalChunk: Int { 5_000 }

  /// Every lease at once: the first statement of a renewal marks the owner alive, and with it
  /// every lease the owner holds, however many the call is given.
  public var leasesPerRenewal: Int { .max }

  /// Gives up the leases `owner` still holds; a key never saved leaves no row.
  ///
  /// One lease (a passivation's) goes in one statement over its row, which cannot close a cycle
  /// and takes no table lock: under the table's lock alone, every eviction of an instance at
  /// its capacity waited for the saves in flight and held back the ones after it. Many (a
  /// shutdown's) go at once under the table's lock with a short lock wait; if one meets a locked
  /// row they go a lease at a time. A lease whose row stays locked is left held: its owner takes
  /// it again when asked, and it lapses once the owner stops.
  public func release(_ leases: [SessionLease<Key>], owner: String) async throws {
    let keys = try leases.map { try self.text($0.key) }
    let tokens = leases.map { Int64(bitPattern: $0.token) }
    if leases.count == 1 {
      return try await self.releaseOne(keys[0], token: tokens[0], owner: owner)
    }
    do {
      try await self.query(
        """
        WITH gate AS (\(unescaped: self.exclusiveGate))
        DELETE FROM \(unescaped: self.table) AS t
        USING UNNEST(\(keys)::text[], \(tokens)::int8[]) AS v(key, token)
        WHERE t.key = v.key AND t.token = v.token AND t.owner = \(owner) AND t.state IS NULL
          AND EXISTS (SELECT FROM gate)
        """
      )
      try await self.query(
        """
        WITH gate AS (\(unescaped: self.exclusiveGate))
        UPDATE \(unescaped: self.table) AS t
        SET owner = NULL, owner_address = NULL, lease_expires_at = 'epoch'
        FROM UNNEST(\(keys)::text[], \(tokens)::int8[]) AS v(key, token)
        WHERE t.key = v.key AND t.token = v.token AND t.owner = \(owner)
          AND EXISTS (SELECT FROM gate)
        """
      )
    } catch  where isLockTimeout(error) {
      for (key, token) in zip(keys, tokens) {
        try await self.releaseOne(key, token: token, owner: owner)
      }
    } catch {
      throw PostgresSessionStorageError.databaseUnavailable(describing(error))
    }
  }

  /// Gives up one lease in one statement: the row goes if it holds no state, else its lease is
  /// cleared (the two conditions exclusive, so no row is changed twice in the statement).
  ///
  /// It takes no table lock: a statement over one row waits for no other row, so it cannot close
  /// a cycle. A row that stays locked is logged and its lease left held.
  private func releaseOne(_ key: String, token: Int64, owner: String) async throws {
    do {
      try await self.query(
        """
        WITH settings AS (SELECT \(unescaped: self.leaseRowWaitSetting)),
        gone AS (
          DELETE FROM \(unescaped: self.table) AS t
          WHERE EXISTS (SELECT FROM settings) AND t.key = \(key) AND t.token = \(token)
            AND t.owner = \(owner) AND t.state IS NULL
        )
        UPDATE \(unescaped: self.table) AS t
        SET owner = NULL, owner_address = NULL, lease_expires_at = 'epoch'
        WHERE EXISTS (SELECT FROM settings) AND t.key = \(key) AND t.token = \(token)
          AND t.owner = \(owner) AND t.state IS NOT NULL
        """
      )
    } catch  where isLockTimeout(error) {
      self.logger.warning(
        "a lease's row is locked by another transaction; it is left held",
        metadata: ["table": "\(self.table)"]
      )
    } catch {
      throw PostgresSessionStorageError.databaseUnavailable(describing(error))
    }
  }
}

import PostgresNIO
import Unidirectional

extension PostgresSessionStorage {
  /// The table's lock taken alone, for a renewal or release.
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

  /// Extends the leases `owner` still holds, a statement per ``renewalChunk`` of them; returns
  /// the keys it lost.
  public func renew(_ leases: [SessionLease<Key>], owner: String) async throws -> [Key] {
    // NB: in key order, so a chunk's rows share the index's and the table's pages.
    let rows = try leases.map { (text: try self.text($0.key), lease: $0) }.sorted {
      $0.text < $1.text
    }
    var lost: [Key] = []
    for start in stride(from: 0, to: rows.count, by: Self.renewalChunk) {
      let chunk = rows[start..<min(start + Self.renewalChunk, rows.count)]
      lost += try await self.renewChunk(chunk.map(\.lease), keys: chunk.map(\.text), owner: owner)
    }
    return lost
  }

  /// How many leases one renewal statement extends.
  ///
  /// A renewal holds the table's advisory lock alone (``rowsLock``), so no save runs while it
  /// does: in chunks, saves go between them, and an instance with 100,000 live keys does not stop
  /// every save for the whole renewal each third of a lease.
  public static var renewalChunk: Int { 5_000 }

  /// Renews `leases`, whose keys as stored are `keys`.
  private func renewChunk(
    _ leases: [SessionLease<Key>],
    keys: [String],
    owner: String
  ) async throws -> [Key] {
    let tokens = leases.map { Int64(bitPattern: $0.token) }
    do {
      let rows = try await self.query(
        """
        WITH gate AS (\(unescaped: self.exclusiveGate))
        UPDATE \(unescaped: self.table) AS t
        SET lease_expires_at = now() + \(self.leaseMilliseconds) * interval '1 millisecond'
        FROM UNNEST(\(keys)::text[], \(tokens)::int8[]) AS v(key, token)
        WHERE t.key = v.key AND t.token = v.token AND t.owner = \(owner) AND EXISTS (SELECT FROM gate)
        RETURNING t.key
        """
      )
      var renewed = Set<String>()
      for key in try rows.decoded(String.self) { renewed.insert(key) }
      return zip(keys, leases).filter { !renewed.contains($0.0) }.map(\.1.key)
    } catch  where isLockTimeout(error) {
      return try await self.renewOneByOne(leases, keys: keys, owner: owner)
    } catch {
      throw PostgresSessionStorageError.databaseUnavailable(describing(error))
    }
  }

  /// Renews a chunk that met a locked row a statement a lease: one that cannot lock its row is
  /// left for the next renewal (a lease outlasts two of them), not reported lost.
  private func renewOneByOne(
    _ leases: [SessionLease<Key>],
    keys: [String],
    owner: String
  ) async throws -> [Key] {
    var lost: [Key] = []
    for (key, lease) in zip(keys, leases) {
      try await self.onOneLease(ifLocked: "it is renewed next time") {
        let rows = try await self.query(
          """
          UPDATE \(unescaped: self.table) AS t
          SET lease_expires_at = now() + \(self.leaseMilliseconds) * interval '1 millisecond'
          FROM (SELECT \(unescaped: self.leaseRowWaitSetting)) AS settings
          WHERE t.key = \(key) AND t.token = \(Int64(bitPattern: lease.token)) AND t.owner = \(owner)
          RETURNING t.key
          """
        )
        if try rows.decoded(String.self).isEmpty { lost.append(lease.key) }
      }
    }
    return lost
  }

  /// Runs one lease's statements, without the table's lock (a statement over one row waits for
  /// no other row, so it cannot close a cycle); a row that stays locked is logged and left.
  private func onOneLease(
    ifLocked outcome: String,
    _ statements: () async throws -> Void
  ) async throws {
    do {
      try await statements()
    } catch  where isLockTimeout(error) {
      self.logger.warning(
        "a lease's row is locked by another transaction; \(outcome)",
        metadata: ["table": "\(self.table)"]
      )
    } catch {
      throw PostgresSessionStorageError.databaseUnavailable(describing(error))
    }
  }

  /// Gives up the leases `owner` still holds; a key never saved leaves no row.
  ///
  /// Like a renewal, all at once under the table's lock with a short lock wait; one that meets a
  /// locked row gives them up a lease at a time, and leaves a lease whose row stays locked to
  /// expire.
  public func release(_ leases: [SessionLease<Key>], owner: String) async throws {
    let keys = try leases.map { try self.text($0.key) }
    let tokens = leases.map { Int64(bitPattern: $0.token) }
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

  /// Gives up one lease; a lease whose row stays locked is left to expire.
  private func releaseOne(_ key: String, token: Int64, owner: String) async throws {
    try await self.onOneLease(ifLocked: "it is left to expire") {
      try await self.query(
        """
        DELETE FROM \(unescaped: self.table)
        USING (SELECT \(unescaped: self.leaseRowWaitSetting)) AS settings
        WHERE key = \(key) AND token = \(token) AND owner = \(owner) AND state IS NULL
        """
      )
      try await self.query(
        """
        UPDATE \(unescaped: self.table) AS t
        SET owner = NULL, owner_address = NULL, lease_expires_at = 'epoch'
        FROM (SELECT \(unescaped: self.leaseRowWaitSetting)) AS settings
        WHERE t.key = \(key) AND t.token = \(token) AND t.owner = \(owner)
        """
      )
    }
  }
}

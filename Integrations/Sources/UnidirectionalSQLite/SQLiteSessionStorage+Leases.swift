import Foundation
import GRDB
import Unidirectional

/// Leases: held while their rows' expiry is ahead or their owner is alive.
///
/// Each owner has one row in `<table>_owners` saying until when it is alive, which its renewals
/// move on: a renewal writes that row and then reads (writing nothing) which of its keys were
/// taken, instead of rewriting every live key's row, which at 100,000 live keys kept the file's
/// one writer busy for a large share of each renewal period. PostgreSQL's storage does the same.
extension SQLiteSessionStorage {
  /// The owners' table.
  var ownersTable: String { "\(self.table)_owners" }

  /// The columns of the owners' table.
  private static var ownerColumns: [String] { ["owner TEXT", "alive_until REAL"] }

  /// Creates the owners' table, or checks that the one there has its columns.
  func createOrCheckOwnersTable() async throws {
    let owners = self.ownersTable
    let found = try await self.pool.write { db -> [String] in
      try db.execute(
        sql: """
          CREATE TABLE IF NOT EXISTS \(owners) (
            owner TEXT PRIMARY KEY NOT NULL,
            alive_until REAL NOT NULL
          )
          """
      )
      return try Self.columns(of: owners, in: db)
    }
    guard found == Self.ownerColumns else {
      throw SQLiteSessionStorageError.schemaMismatch(
        table: owners,
        expected: Self.ownerColumns,
        found: found
      )
    }
  }

  /// What a lease's expiry is read from, for a row `t`: its own expiry and its owner's liveness.
  var leaseColumns: String {
    """
    lease_expiry,
    (SELECT o.alive_until FROM \(self.ownersTable) AS o WHERE o.owner = t.owner) AS alive_until
    """
  }

  /// Whether the lease on row `t` has lapsed, at the time bound twice after it: its row's expiry
  /// past, and its owner not alive.
  var leaseHasLapsed: String {
    """
    (t.lease_expiry <= ? AND NOT EXISTS (
      SELECT 1 FROM \(self.ownersTable) AS o WHERE o.owner = t.owner AND o.alive_until > ?))
    """
  }

  /// Until when the lease on `row` (read with ``leaseColumns``) holds.
  static func heldUntil(_ row: Row, of key: String) throws -> Double {
    let expiry: Double = try row.stored("lease_expiry", of: key) ?? 0
    let alive: Double = try row.stored("alive_until", of: key) ?? 0
    return max(expiry, alive)
  }

  /// Marks `owner` alive for a lease more, then returns the keys of `leases` whose rows it no
  /// longer holds under their tokens (taken while it was not alive, or by an instance under its
  /// name).
  ///
  /// The read comes after the mark, so it sees every key taken before it; nobody takes a key
  /// while its owner is alive.
  public func renew(_ leases: [SessionLease<Key>], owner: String) async throws -> [Key] {
    let (owners, now, lease) = (self.ownersTable, self.now, self.leaseSeconds)
    try await self.pool.write { db in
      // NB: an owner alive for none of the last day is forgotten (a restarted instance has a new
      // name by default); a name forgotten is a name not alive, as it was.
      try db.execute(
        sql: "DELETE FROM \(owners) WHERE alive_until < ? AND owner <> ?",
        arguments: [now - 86_400, owner]
      )
      try db.execute(
        sql: """
          INSERT INTO \(owners) (owner, alive_until) VALUES (?, ?)
          ON CONFLICT(owner) DO UPDATE SET alive_until = max(alive_until, excluded.alive_until)
          """,
        arguments: [owner, now + lease]
      )
    }
    let rows = try leases.map { (try self.text($0.key), Int64(bitPattern: $0.token), $0.key) }
    let table = self.table
    return try await self.pool.read { db in
      var lost: [Key] = []
      for start in stride(from: 0, to: rows.count, by: Self.renewalChunk) {
        let chunk = rows[start..<min(start + Self.renewalChunk, rows.count)]
        let marks = Array(repeating: "?", count: chunk.count).joined(separator: ",")
        var held: [String: Int64] = [:]
        let found = try Row.fetchCursor(
          db,
          sql: "SELECT key, token, owner FROM \(table) WHERE key IN (\(marks))",
          arguments: StatementArguments(chunk.map(\.0))
        )
        while let row = try found.next() {
          // NB: a value of another type in a row is a lease not held, not a failed renewal
          // (which would let every other lease lapse).
          guard let key: String = try? row.stored("key", of: ""),
            let holder: String = try? row.stored("owner", of: key), holder == owner,
            let token: Int64 = try? row.stored("token", of: key)
          else { continue }
          held[key] = token
        }
        lost += chunk.filter { held[$0.0] != $0.1 }.map(\.2)
      }
      return lost
    }
  }

  /// How many leases one statement of a renewal's read checks (SQLite binds at most 32,766
  /// values to a statement).
  public static var renewalChunk: Int { 5_000 }

  /// Every lease at once: a renewal's one write marks the owner alive, and with it every lease
  /// the owner holds, however many the call is given.
  public var leasesPerRenewal: Int { .max }

  /// Gives up the leases `owner` still holds; a key never saved leaves no row.
  public func release(_ leases: [SessionLease<Key>], owner: String) async throws {
    let table = self.table
    let rows = try leases.map { (try self.text($0.key), Int64(bitPattern: $0.token)) }
    try await self.pool.write { db in
      for (text, token) in rows {
        try db.execute(
          sql: "DELETE FROM \(table) WHERE key = ? AND token = ? AND owner = ? AND state IS NULL",
          arguments: [text, token, owner]
        )
        try db.execute(
          sql: """
            UPDATE \(table) SET owner = NULL, owner_address = NULL, lease_expiry = 0
            WHERE key = ? AND token = ? AND owner = ?
            """,
          arguments: [text, token, owner]
        )
      }
    }
  }
}

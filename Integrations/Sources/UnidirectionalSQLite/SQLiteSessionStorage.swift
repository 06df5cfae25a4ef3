import Foundation
import GRDB
import Unidirectional

/// Sessions in an SQLite file, through GRDB: the embedded default.
///
/// ```swift
/// let storage = try await SQLiteSessionStorage<String, Cart.State>(path: "carts.sqlite")
/// let carts = StoreRegistry(storage: storage, owner: "node-a") { Cart.State(customer: $0) }
///   reducer: { Cart() }
/// ```
///
/// - The file is created on first use, in WAL mode with `synchronous = FULL`: a save is
///   acknowledged once it is on disk, and survives a crash of the process (and of the machine).
/// - Each batch of saves is one transaction.
/// - A state is stored as JSON with its encoding version (``encodingVersion``); a row with another
///   version, or that no longer decodes, fails that key's activation and is left as it is.
/// - Leases expire on this machine's wall clock (an SQLite file is shared by the processes of
///   one machine).
public final class SQLiteSessionStorage<Key: Hashable & Sendable, State: Codable & Sendable>:
  SessionStorage
{
  /// The version of the stored encoding (JSON of `State`) this storage reads and writes.
  public static var encodingVersion: Int { 1 }
  /// The longest key this storage takes, in UTF-8 bytes.
  public static var maximumKeyLength: Int { 1_024 }
  /// The largest encoded state this storage takes, in bytes.
  public static var maximumStateSize: Int { 16 * 1_024 * 1_024 }

  /// How long a lease lasts without renewal.
  public let leaseDuration: Duration
  /// The database file.
  public let path: String
  private let pool: DatabasePool
  private let table: String

  /// Opens (or creates) the database at `path`, and creates or checks its table.
  ///
  /// - Parameters:
  ///   - path: The database file.
  ///   - table: The table's name (letters, digits and `_`).
  ///   - leaseDuration: How long a lease lasts without renewal.
  /// - Throws: ``SQLiteSessionStorageError`` when the file cannot be opened or the table's
  ///   schema differs from the expected one (the difference is named).
  public init(
    path: String,
    table: String = "sessions",
    leaseDuration: Duration = .seconds(10)
  ) async throws {
    guard table.range(of: "^[A-Za-z_][A-Za-z0-9_]{0,62}$", options: .regularExpression) != nil
    else {
      throw SQLiteSessionStorageError.invalidTable(table)
    }
    self.path = path
    self.table = table
    self.leaseDuration = leaseDuration
    do {
      self.pool = try DatabasePool(path: path)
      try await self.pool.writeWithoutTransaction { db in
        try db.execute(sql: "PRAGMA synchronous = FULL")
      }
    } catch {
      throw SQLiteSessionStorageError.cannotOpen(path: path, underlying: "\(error)")
    }
    try await self.createOrCheckSchema()
  }

  private static var columns: [(name: String, type: String)] {
    [
      ("key", "TEXT"), ("state", "BLOB"), ("encoding_version", "INTEGER"), ("owner", "TEXT"),
      ("lease_expiry", "REAL"), ("token", "INTEGER"),
    ]
  }

  private func createOrCheckSchema() async throws {
    let table = self.table
    let existing = try await self.pool.write { db -> [(String, String)] in
      try db.execute(
        sql: """
          CREATE TABLE IF NOT EXISTS \(table) (
            key TEXT PRIMARY KEY NOT NULL,
            state BLOB,
            encoding_version INTEGER NOT NULL DEFAULT 1,
            owner TEXT,
            lease_expiry REAL NOT NULL DEFAULT 0,
            token INTEGER NOT NULL DEFAULT 0
          )
          """
      )
      return try Row.fetchAll(db, sql: "PRAGMA table_info(\(table))").map {
        (($0["name"] as String?) ?? "", (($0["type"] as String?) ?? "").uppercased())
      }
    }
    let expected = Self.columns.map { "\($0.name) \($0.type)" }
    let found = existing.map { "\($0.0) \($0.1)" }
    guard expected == found else {
      throw SQLiteSessionStorageError.schemaMismatch(
        table: table,
        expected: expected,
        found: found
      )
    }
  }

  private var now: Double { Date().timeIntervalSince1970 }

  private var leaseSeconds: Double {
    let (seconds, attoseconds) = self.leaseDuration.components
    return Double(seconds) + Double(attoseconds) / 1e18
  }

  private func text(_ key: Key) throws -> String {
    let text = "\(key)"
    guard text.utf8.count <= Self.maximumKeyLength else {
      throw SQLiteSessionStorageError.keyTooLong(
        key: String(text.prefix(64)),
        length: text.utf8.count
      )
    }
    return text
  }

  /// Takes `key`'s lease for `owner` and loads its state, in one transaction.
  public func acquire(_ key: Key, owner: String) async throws -> SessionAcquisition<State> {
    let text = try self.text(key)
    let (table, now, lease) = (self.table, self.now, self.leaseSeconds)
    let row = try await self.pool.write {
      db -> (heldBy: String?, token: Int64, state: Data?, version: Int) in
      let current = try Row.fetchOne(
        db,
        sql:
          "SELECT owner, lease_expiry, token, state, encoding_version FROM \(table) WHERE key = ?",
        arguments: [text]
      )
      let currentOwner: String? = current?["owner"]
      let expiry: Double = current?["lease_expiry"] ?? 0
      var token: Int64 = current?["token"] ?? 0
      if let currentOwner, currentOwner != owner, expiry > now {
        return (currentOwner, 0, nil, 0)
      }
      if currentOwner != owner || expiry <= now { token += 1 }
      try db.execute(
        sql: """
          INSERT INTO \(table) (key, owner, lease_expiry, token) VALUES (?, ?, ?, ?)
          ON CONFLICT(key) DO UPDATE SET owner = excluded.owner,
            lease_expiry = excluded.lease_expiry, token = excluded.token
          """,
        arguments: [text, owner, now + lease, token]
      )
      return (nil, token, current?["state"], current?["encoding_version"] ?? Self.encodingVersion)
    }
    if let holder = row.heldBy { return .heldBy(owner: holder) }
    guard let data = row.state else { return .acquired(token: UInt64(row.token), state: nil) }
    guard row.version == Self.encodingVersion else {
      throw SQLiteSessionStorageError.unreadableState(
        key: text,
        reason:
          "it is stored with encoding version \(row.version); this build reads version \(Self.encodingVersion)"
      )
    }
    do {
      return .acquired(
        token: UInt64(row.token),
        state: try JSONDecoder().decode(State.self, from: data)
      )
    } catch {
      throw SQLiteSessionStorageError.unreadableState(key: text, reason: "\(error)")
    }
  }

  /// Saves the batch in one transaction; a write whose token is stale is refused.
  public func save(
    _ writes: [SessionWrite<Key, State>],
    owner: String
  ) async throws
    -> [SessionSaveResult]
  {
    let encoder = JSONEncoder()
    let rows = try writes.map { write -> (String, Data, Int64) in
      let key = try self.text(write.key)
      let data = try encoder.encode(write.state)
      guard data.count <= Self.maximumStateSize else {
        throw SQLiteSessionStorageError.stateTooLarge(key: key, size: data.count)
      }
      return (key, data, Int64(write.token))
    }
    let table = self.table
    return try await self.pool.write { db in
      let update = try db.cachedStatement(
        sql: """
          UPDATE \(table) SET state = ?, encoding_version = \(Self.encodingVersion)
          WHERE key = ? AND token = ? AND owner = ?
          """
      )
      return try rows.map { key, data, token in
        try update.execute(arguments: [data, key, token, owner])
        if db.changesCount == 1 { return .saved }
        let current = try String.fetchOne(
          db,
          sql: "SELECT owner FROM \(table) WHERE key = ?",
          arguments: [key]
        )
        return .staleToken(currentOwner: current)
      }
    }
  }

  /// Extends the leases `owner` still holds; returns the keys it lost.
  public func renew(_ leases: [SessionLease<Key>], owner: String) async throws -> [Key] {
    let (table, now, lease) = (self.table, self.now, self.leaseSeconds)
    let rows = try leases.map { (try self.text($0.key), Int64($0.token), $0.key) }
    return try await self.pool.write { db in
      var lost: [Key] = []
      for (text, token, key) in rows {
        try db.execute(
          sql: "UPDATE \(table) SET lease_expiry = ? WHERE key = ? AND token = ? AND owner = ?",
          arguments: [now + lease, text, token, owner]
        )
        if db.changesCount == 0 { lost.append(key) }
      }
      return lost
    }
  }

  /// Gives up the leases `owner` still holds.
  public func release(_ leases: [SessionLease<Key>], owner: String) async throws {
    let table = self.table
    let rows = try leases.map { (try self.text($0.key), Int64($0.token)) }
    try await self.pool.write { db in
      for (text, token) in rows {
        try db.execute(
          sql: """
            UPDATE \(table) SET owner = NULL, lease_expiry = 0
            WHERE key = ? AND token = ? AND owner = ?
            """,
          arguments: [text, token, owner]
        )
      }
    }
  }

  /// The state stored for `key`, read directly (for tools and tests).
  public func storedState(for key: Key) async throws -> State? {
    let text = try self.text(key)
    let table = self.table
    let data = try await self.pool.read { db in
      try Data.fetchOne(db, sql: "SELECT state FROM \(table) WHERE key = ?", arguments: [text])
    }
    return try data.map { try JSONDecoder().decode(State.self, from: $0) }
  }
}

/// What went wrong with an ``SQLiteSessionStorage``.
public enum SQLiteSessionStorageError: Error, CustomStringConvertible {
  /// The table name is not a plain identifier.
  case invalidTable(String)
  /// The database file could not be opened or set up.
  case cannotOpen(path: String, underlying: String)
  /// The table exists with other columns.
  case schemaMismatch(table: String, expected: [String], found: [String])
  /// A stored state does not decode (or has another encoding version); it was left as it is.
  case unreadableState(key: String, reason: String)
  /// A key longer than ``SQLiteSessionStorage/maximumKeyLength``.
  case keyTooLong(key: String, length: Int)
  /// A state larger than ``SQLiteSessionStorage/maximumStateSize`` once encoded.
  case stateTooLarge(key: String, size: Int)

  /// What went wrong, and what to do.
  public var description: String {
    switch self {
    case .invalidTable(let table):
      "'\(table)' is not a valid table name (letters, digits and '_', at most 63)"
    case .cannotOpen(let path, let underlying):
      "cannot open the SQLite database at '\(path)': \(underlying)"
    case .schemaMismatch(let table, let expected, let found):
      """
      the table '\(table)' has columns [\(found.joined(separator: ", "))]; expected \
      [\(expected.joined(separator: ", "))]: use another table, or migrate this one
      """
    case .unreadableState(let key, let reason):
      "the stored state of '\(key)' cannot be read (\(reason)); it was left as it is"
    case .keyTooLong(let key, let length):
      "the key '\(key)…' is \(length) bytes long; SQLite sessions take keys up to 1024 bytes"
    case .stateTooLarge(let key, let size):
      "the state of '\(key)' is \(size) bytes once encoded; SQLite sessions take up to 16 MiB"
    }
  }
}

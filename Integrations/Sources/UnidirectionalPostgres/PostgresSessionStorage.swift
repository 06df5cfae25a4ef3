import Foundation
import Logging
import PostgresNIO
import Unidirectional

/// Sessions in a PostgreSQL table, through postgres-nio's `PostgresClient`: many server instances,
/// one database.
///
/// ```swift
/// let storage = try await PostgresSessionStorage<String, Cart.State>(
///   client: postgresClient, table: "carts", leaseDuration: .seconds(10))
/// ```
///
/// - One row per key: the state (JSON, with its encoding version), and the lease: its owner, its
///   expiry and its fencing token.
/// - Lease times are the database server's (`now()`), so instances on different machines agree.
/// - A save checks the token in the same statement that writes (`UPDATE … WHERE token = …`): a
///   stale owner can never overwrite. A batch of saves is one statement.
/// - The table is created at start, or checked: a table with other columns is refused, naming
///   the difference.
///
/// The client must be running (`client.run()`, or as a service of the server's group).
public final class PostgresSessionStorage<Key: Hashable & Sendable, State: Codable & Sendable>:
  SessionStorage
{
  /// The version of the stored encoding (JSON of `State`).
  public static var encodingVersion: Int32 { 1 }
  /// The longest key this storage takes, in UTF-8 bytes.
  public static var maximumKeyLength: Int { 1_024 }
  /// The largest encoded state this storage takes, in bytes.
  public static var maximumStateSize: Int { 64 * 1_024 * 1_024 }

  /// How long a lease lasts without renewal.
  public let leaseDuration: Duration
  /// Four saves in flight at once: their round trips to the server overlap.
  public var concurrentSaves: Int { 4 }
  private let client: PostgresClient
  private let table: String
  private let logger: Logger

  /// Connects to the table (creating it if it does not exist).
  ///
  /// - Throws: ``PostgresSessionStorageError`` when the database cannot be reached (naming the
  ///   connection) or the table's schema differs.
  public init(
    client: PostgresClient,
    table: String = "sessions",
    leaseDuration: Duration = .seconds(10),
    logger: Logger = Logger(label: "unidirectional.postgres")
  ) async throws {
    guard table.range(of: "^[a-z_][a-z0-9_]{0,62}$", options: .regularExpression) != nil else {
      throw PostgresSessionStorageError.invalidTable(table)
    }
    self.client = client
    self.table = table
    self.leaseDuration = leaseDuration
    self.logger = logger
    try await self.createOrCheckSchema()
  }

  private static var columns: [String] {
    [
      "key text", "state bytea", "encoding_version integer", "owner text",
      "lease_expires_at timestamp with time zone", "token bigint",
    ]
  }

  private func createOrCheckSchema() async throws {
    do {
      try await self.client.query(
        """
        CREATE TABLE IF NOT EXISTS \(unescaped: self.table) (
          key text PRIMARY KEY,
          state bytea,
          encoding_version integer NOT NULL DEFAULT 1,
          owner text,
          lease_expires_at timestamptz NOT NULL DEFAULT 'epoch',
          token bigint NOT NULL DEFAULT 0
        )
        """,
        logger: self.logger
      )
      let rows = try await self.client.query(
        """
        SELECT column_name, data_type FROM information_schema.columns
        WHERE table_name = \(self.table) AND table_schema = current_schema()
        ORDER BY ordinal_position
        """,
        logger: self.logger
      )
      var found: [String] = []
      for try await (name, type) in rows.decode((String, String).self) {
        found.append("\(name) \(type)")
      }
      guard found == Self.columns else {
        throw PostgresSessionStorageError.schemaMismatch(
          table: self.table,
          expected: Self.columns,
          found: found
        )
      }
    } catch let error as PostgresSessionStorageError {
      throw error
    } catch {
      throw PostgresSessionStorageError.databaseUnavailable(describing(error))
    }
  }

  private var leaseMilliseconds: Int64 {
    let (seconds, attoseconds) = self.leaseDuration.components
    return seconds * 1_000 + attoseconds / 1_000_000_000_000_000
  }

  private func text(_ key: Key) throws -> String {
    let text = "\(key)"
    guard text.utf8.count <= Self.maximumKeyLength else {
      throw PostgresSessionStorageError.keyTooLong(
        key: String(text.prefix(64)),
        length: text.utf8.count
      )
    }
    return text
  }

  /// Takes `key`'s lease for `owner` (free, expired or already `owner`'s) and loads its state, in
  /// one statement.
  public func acquire(_ key: Key, owner: String) async throws -> SessionAcquisition<State> {
    let text = try self.text(key)
    let lease = self.leaseMilliseconds
    do {
      let rows = try await self.client.query(
        """
        INSERT INTO \(unescaped: self.table) AS t (key, owner, lease_expires_at, token)
        VALUES (\(text), \(owner), now() + \(lease) * interval '1 millisecond', 1)
        ON CONFLICT (key) DO UPDATE SET
          token = CASE WHEN t.owner = excluded.owner AND t.lease_expires_at > now()
            THEN t.token ELSE t.token + 1 END,
          owner = excluded.owner,
          lease_expires_at = excluded.lease_expires_at
        WHERE t.owner IS NULL OR t.owner = excluded.owner OR t.lease_expires_at <= now()
        RETURNING t.token, t.state, t.encoding_version
        """,
        logger: self.logger
      )
      var acquired: (Int64, ByteBuffer?, Int32)?
      for try await row in rows.decode((Int64, ByteBuffer?, Int32).self) { acquired = row }
      guard let (token, state, version) = acquired else {
        let owners = try await self.client.query(
          "SELECT owner FROM \(unescaped: self.table) WHERE key = \(text)",
          logger: self.logger
        )
        var holder: String?
        for try await (current) in owners.decode(String?.self) { holder = current }
        return .heldBy(owner: holder ?? "another owner")
      }
      guard let state else { return .acquired(token: UInt64(token), state: nil) }
      guard version == Self.encodingVersion else {
        throw PostgresSessionStorageError.unreadableState(
          key: text,
          reason:
            "stored with encoding version \(version); this build reads \(Self.encodingVersion)"
        )
      }
      do {
        let decoded = try JSONDecoder().decode(State.self, from: Data(buffer: state))
        return .acquired(token: UInt64(token), state: decoded)
      } catch {
        throw PostgresSessionStorageError.unreadableState(key: text, reason: "\(error)")
      }
    } catch let error as PostgresSessionStorageError {
      throw error
    } catch {
      throw PostgresSessionStorageError.databaseUnavailable(describing(error))
    }
  }

  /// Saves the batch in one statement; a write whose token is stale is refused.
  public func save(
    _ writes: [SessionWrite<Key, State>],
    owner: String
  ) async throws
    -> [SessionSaveResult]
  {
    let encoder = JSONEncoder()
    var keys: [String] = []
    var states: [ByteBuffer] = []
    var tokens: [Int64] = []
    for write in writes {
      let key = try self.text(write.key)
      let data = try encoder.encode(write.state)
      guard data.count <= Self.maximumStateSize else {
        throw PostgresSessionStorageError.stateTooLarge(key: key, size: data.count)
      }
      keys.append(key)
      states.append(ByteBuffer(data: data))
      tokens.append(Int64(write.token))
    }
    do {
      let rows = try await self.client.query(
        """
        UPDATE \(unescaped: self.table) AS t
        SET state = v.state, encoding_version = \(Self.encodingVersion)
        FROM UNNEST(\(keys)::text[], \(states)::bytea[], \(tokens)::int8[]) AS v(key, state, token)
        WHERE t.key = v.key AND t.token = v.token AND t.owner = \(owner)
        RETURNING t.key
        """,
        logger: self.logger
      )
      var saved = Set<String>()
      for try await key in rows.decode(String.self) { saved.insert(key) }
      if saved.count == keys.count { return keys.map { _ in .saved } }
      let stale = keys.filter { !saved.contains($0) }
      let owners = try await self.client.query(
        "SELECT key, owner FROM \(unescaped: self.table) WHERE key = ANY(\(stale)::text[])",
        logger: self.logger
      )
      var current: [String: String] = [:]
      for try await (key, holder) in owners.decode((String, String?).self) {
        if let holder { current[key] = holder }
      }
      return keys.map { saved.contains($0) ? .saved : .staleToken(currentOwner: current[$0]) }
    } catch {
      throw PostgresSessionStorageError.databaseUnavailable(describing(error))
    }
  }

  /// Extends the leases `owner` still holds, in one statement; returns the keys it lost.
  public func renew(_ leases: [SessionLease<Key>], owner: String) async throws -> [Key] {
    let keys = try leases.map { try self.text($0.key) }
    let tokens = leases.map { Int64($0.token) }
    do {
      let rows = try await self.client.query(
        """
        UPDATE \(unescaped: self.table) AS t
        SET lease_expires_at = now() + \(self.leaseMilliseconds) * interval '1 millisecond'
        FROM UNNEST(\(keys)::text[], \(tokens)::int8[]) AS v(key, token)
        WHERE t.key = v.key AND t.token = v.token AND t.owner = \(owner)
        RETURNING t.key
        """,
        logger: self.logger
      )
      var renewed = Set<String>()
      for try await key in rows.decode(String.self) { renewed.insert(key) }
      return zip(keys, leases).filter { !renewed.contains($0.0) }.map(\.1.key)
    } catch {
      throw PostgresSessionStorageError.databaseUnavailable(describing(error))
    }
  }

  /// Gives up the leases `owner` still holds.
  public func release(_ leases: [SessionLease<Key>], owner: String) async throws {
    let keys = try leases.map { try self.text($0.key) }
    let tokens = leases.map { Int64($0.token) }
    do {
      try await self.client.query(
        """
        UPDATE \(unescaped: self.table) AS t SET owner = NULL, lease_expires_at = 'epoch'
        FROM UNNEST(\(keys)::text[], \(tokens)::int8[]) AS v(key, token)
        WHERE t.key = v.key AND t.token = v.token AND t.owner = \(owner)
        """,
        logger: self.logger
      )
    } catch {
      throw PostgresSessionStorageError.databaseUnavailable(describing(error))
    }
  }

  /// The state stored for `key`, read directly (for tools and tests).
  public func storedState(for key: Key) async throws -> State? {
    let text = try self.text(key)
    let rows = try await self.client.query(
      "SELECT state FROM \(unescaped: self.table) WHERE key = \(text)",
      logger: self.logger
    )
    for try await state in rows.decode(ByteBuffer?.self) {
      guard let state else { return nil }
      return try JSONDecoder().decode(State.self, from: Data(buffer: state))
    }
    return nil
  }
}

/// `PSQLError`'s description is only "Database error": the reflection names the cause.
private func describing(_ error: any Error) -> String {
  if let error = error as? PSQLError {
    let message = error.serverInfo?[.message] ?? ""
    let state = error.serverInfo?[.sqlState] ?? ""
    if !message.isEmpty { return "\(message) (SQLSTATE \(state))" }
    return String(reflecting: error)
  }
  return String(reflecting: error)
}

/// What went wrong with a ``PostgresSessionStorage``.
public enum PostgresSessionStorageError: Error, CustomStringConvertible {
  /// The table name is not a plain lowercase identifier.
  case invalidTable(String)
  /// The database could not be reached, or a statement failed.
  case databaseUnavailable(String)
  /// The table exists with other columns.
  case schemaMismatch(table: String, expected: [String], found: [String])
  /// A stored state does not decode (or has another encoding version); it was left as it is.
  case unreadableState(key: String, reason: String)
  /// A key longer than ``PostgresSessionStorage/maximumKeyLength``.
  case keyTooLong(key: String, length: Int)
  /// A state larger than ``PostgresSessionStorage/maximumStateSize`` once encoded.
  case stateTooLarge(key: String, size: Int)

  /// What went wrong, and what to do.
  public var description: String {
    switch self {
    case .invalidTable(let table):
      "'\(table)' is not a valid table name (lowercase letters, digits and '_', at most 63)"
    case .databaseUnavailable(let reason):
      "the PostgreSQL database failed: \(reason)"
    case .schemaMismatch(let table, let expected, let found):
      """
      the table '\(table)' has columns [\(found.joined(separator: ", "))]; expected \
      [\(expected.joined(separator: ", "))]: use another table, or migrate this one
      """
    case .unreadableState(let key, let reason):
      "the stored state of '\(key)' cannot be read (\(reason)); it was left as it is"
    case .keyTooLong(let key, let length):
      "the key '\(key)…' is \(length) bytes long; Postgres sessions take keys up to 1024 bytes"
    case .stateTooLarge(let key, let size):
      "the state of '\(key)' is \(size) bytes once encoded; Postgres sessions take up to 64 MiB"
    }
  }
}

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
/// - One row per key: the state (JSON, with the app's `stateVersion` and the session's idempotency
///   keys), and the lease: its owner, its expiry and its fencing token. A row's key is the key's
///   `String(describing:)`, so two keys must never describe themselves alike.
/// - A lease holds while its row's expiry (set when it is taken, and moved on by every save) is
///   ahead, or while its owner is alive: a renewal marks the owner alive in its one row of
///   ``ownersTable``, and reads (without writing) which of its leases it
///   lost. So renewing costs one write however many keys are live, and an instance that stops
///   (killed, frozen, cut off) loses all its leases a ``leaseDuration`` after its last renewal.
/// - Lease times are the database server's (`now()`), so instances on different machines agree.
/// - A save checks the token in the same statement that writes (`UPDATE … WHERE token = …`): a
///   stale owner can never overwrite. A batch of saves is one statement. Every acquisition takes
///   a new token, so a save of an earlier activation that lands late is refused too.
/// - No call waits without end: for a connection at most ``connectionWait``, for a lock at most
///   ``lockWait``, and for the database's answer at most ``answerWait`` (then the connection is
///   closed); each fails as ``PostgresSessionStorageError/databaseUnavailable(_:)``.
/// - Every instance's client pool (`maximumConnections`, 20 unless set) counts against the
///   server's `max_connections`: size them so all fit. Once PostgreSQL refuses a connection,
///   postgres-nio's pool queues every statement behind its next attempt instead of lending the
///   connections it holds, so sends stall until ``connectionWait`` and fail.
/// - The table is created at start, or upgraded in place from an earlier release's, under an
///   advisory lock (instances starting together on a new database all start), then checked: a
///   table with other columns is refused, naming the difference.
/// - An older stored state is migrated on activation (`migrate`) and saved at the current version;
///   a newer one, or one that does not decode or migrate, throws ``SessionStateUnreadable`` for its
///   key and is left as it is.
/// - A state past ``maximumStateSize`` is refused on its own; the rest of its batch is saved.
/// - ``erase(_:token:owner:)`` deletes the row in the statement that checks the lease. As with any
///   PostgreSQL delete, its bytes stay in the table's pages until vacuum reclaims them, and in the
///   write-ahead log and backups until they rotate: physical erasure is the operator's (a
///   `VACUUM` of the table after erasures, and the retention of logs and backups).
///
/// The initializer queries the database, so the client must already be running. Run it as a child
/// task of a group around the whole service, cancelled after the service group (and with it the
/// registry's final saves) has ended:
///
/// ```swift
/// try await withThrowingDiscardingTaskGroup { group in
///   group.addTask { await client.run() }
///   defer { group.cancelAll() }
///   let storage = try await PostgresSessionStorage<String, Cart.State>(client: client)
///   let carts = StoreRegistry(storage: storage, owner: "node-a") { ... } reducer: { ... }
///   let app = Application(router: router, services: [carts])  // Hummingbird's
///   try await app.runService()  // SIGTERM: the server stops, then the registry saves
/// }
/// ```
public final class PostgresSessionStorage<Key: Hashable & Sendable, State: Codable & Sendable>:
  SessionStorage
{
  /// The longest key this storage takes, in UTF-8 bytes.
  public static var maximumKeyLength: Int { 1_024 }
  /// The largest encoded state this storage takes, in bytes.
  public static var maximumStateSize: Int { 64 * 1_024 * 1_024 }

  /// How long a lease lasts without renewal.
  public let leaseDuration: Duration
  /// How many saves may be in flight at once, each on a connection of the client's pool: their
  /// round trips to the server overlap.
  public let concurrentSaves: Int
  /// The version of `State` this app reads and writes; rows are stored with it.
  public let stateVersion: Int
  /// How long a statement waits for a connection of the client's pool before the storage fails
  /// it (``PostgresSessionStorageError/databaseUnavailable(_:)``): while the database is down,
  /// sends fail fast instead of waiting for it to come back.
  public let connectionWait: Duration
  /// How long a statement waits for a lock (a row another transaction holds, the table's
  /// advisory lock) before the storage fails it
  /// (``PostgresSessionStorageError/databaseUnavailable(_:)``): a row left locked by someone's
  /// open transaction fails that key's sends, and the saves it was batched with once, instead of
  /// holding every save behind it.
  public let lockWait: Duration
  /// How long a statement waits for the database's answer, once it has a connection, before the
  /// storage closes that connection and fails it
  /// (``PostgresSessionStorageError/databaseUnavailable(_:)``): a database whose address moved
  /// in a failover, or a network that went silent without a reset, fails the sends waiting on it
  /// instead of holding them until the operating system gives up on the connection.
  public let answerWait: Duration
  private let migrate: (@Sendable (StoredState) throws -> State)?
  private let client: PostgresClient
  let table: String
  let logger: Logger

  /// Connects to the table (creating or upgrading it).
  ///
  /// - Parameters:
  ///   - client: A running client (see the pattern above).
  ///   - table: The table's name (lowercase letters, digits and `_`, at most 56); the owners'
  ///     liveness goes in a second table, ``ownersTable``, made beside it.
  ///   - leaseDuration: How long a lease lasts without renewal.
  ///   - stateVersion: The version of `State` this app reads and writes (1 for the first).
  ///   - concurrentSaves: How many saves may be in flight at once. Two keep a server on the same
  ///     machine busy with batches of a useful size; a server across a network, with longer round
  ///     trips, keeps up with more. Each save in flight takes a connection of the client's pool.
  ///   - connectionWait: How long a statement waits for a connection of the pool before it
  ///     fails.
  ///   - lockWait: How long a statement waits for a lock before it fails (at least a
  ///     millisecond).
  ///   - answerWait: How long a statement waits for the database's answer before its connection
  ///     is closed and it fails; at least a second more than `lockWait`. Raise it for states
  ///     whose batches take longer to write.
  ///   - logger: Where the storage's queries log; none by default.
  ///   - migrate: Turns a state stored at an older version into the current one; `nil` refuses
  ///     older states.
  /// - Throws: ``PostgresSessionStorageError`` when the database cannot be reached (naming the
  ///   connection) or the table's schema differs.
  public init(
    client: PostgresClient,
    table: String = "sessions",
    leaseDuration: Duration = .seconds(10),
    stateVersion: Int = 1,
    concurrentSaves: Int = 2,
    connectionWait: Duration = .seconds(5),
    lockWait: Duration = .seconds(5),
    answerWait: Duration = .seconds(15),
    logger: Logger = Logger(
      label: "unidirectional.postgres",
      factory: { _ in SwiftLogNoOpLogHandler() }
    ),
    migrate: (@Sendable (StoredState) throws -> State)? = nil
  ) async throws {
    // NB: 56 characters, so the owners' table's name (``ownersTable``) is whole too.
    guard table.range(of: "^[a-z_][a-z0-9_]{0,55}$", options: .regularExpression) != nil else {
      throw PostgresSessionStorageError.invalidTable(table)
    }
    // NB: stored in an `integer` column.
    guard (1...Int(Int32.max)).contains(stateVersion) else {
      throw PostgresSessionStorageError.invalidStateVersion(stateVersion)
    }
    guard concurrentSaves >= 1 else {
      throw PostgresSessionStorageError.invalidConcurrentSaves(concurrentSaves)
    }
    guard leaseDuration > .zero else {
      throw PostgresSessionStorageError.invalidLeaseDuration(leaseDuration)
    }
    self.client = client
    self.table = table
    self.leaseDuration = leaseDuration
    self.stateVersion = stateVersion
    self.concurrentSaves = concurrentSaves
    self.connectionWait = connectionWait
    self.lockWait = max(lockWait, .milliseconds(1))
    self.answerWait = max(answerWait, self.lockWait + .seconds(1))
    self.migrate = migrate
    self.logger = logger
    try await self.createOrCheckSchema()
  }

  private static var columns: [String] {
    [
      "key text", "state bytea", "encoding_version integer", "owner text",
      "lease_expires_at timestamp with time zone", "token bigint", "idempotency_keys bytea",
      "owner_address text",
    ]
  }

  private static var ownersColumns: [String] {
    ["owner text", "alive_until timestamp with time zone"]
  }

  private func createOrCheckSchema() async throws {
    let table = self.table
    let owners = self.ownersTable
    do {
      // NB: concurrent `CREATE TABLE IF NOT EXISTS` is not safe in PostgreSQL (two instances
      // starting together on a new database: one fails on a unique index of the catalog). An
      // advisory lock held for the transaction makes the instances create or upgrade in turn.
      let logger = self.logger
      let found = try await self.client.withConnection(within: self.connectionWait) { connection in
        try await connection.withTransaction(logger: logger) { connection in
          try await connection.query(
            "SELECT pg_advisory_xact_lock(hashtext(\("unidirectional.schema." + table)))",
            logger: logger
          )
          try await connection.query(
            """
            CREATE TABLE IF NOT EXISTS \(unescaped: owners) (
              owner text PRIMARY KEY,
              alive_until timestamptz NOT NULL
            )
            """,
            logger: logger
          )
          try await connection.query(
            """
            CREATE TABLE IF NOT EXISTS \(unescaped: table) (
              key text PRIMARY KEY,
              state bytea,
              encoding_version integer NOT NULL DEFAULT 1,
              owner text,
              lease_expires_at timestamptz NOT NULL DEFAULT 'epoch',
              token bigint NOT NULL DEFAULT 0,
              idempotency_keys bytea,
              owner_address text
            )
            """,
            logger: logger
          )
          // The first release's table gains the columns that came since; its rows stay.
          try await connection.query(
            """
            ALTER TABLE \(unescaped: table) ADD COLUMN IF NOT EXISTS idempotency_keys bytea,
              ADD COLUMN IF NOT EXISTS owner_address text
            """,
            logger: logger
          )
          var found: [String: [String]] = [:]
          for name in [owners, table] {
            let rows = try await connection.query(
              """
              SELECT column_name, data_type FROM information_schema.columns
              WHERE table_name = \(name) AND table_schema = current_schema()
              ORDER BY ordinal_position
              """,
              logger: logger
            )
            for try await (column, type) in rows.decode((String, String).self) {
              found[name, default: []].append("\(column) \(type)")
            }
          }
          return found
        }
      }
      for (name, expected) in [(owners, Self.ownersColumns), (table, Self.columns)] {
        guard found[name, default: []] == expected else {
          throw PostgresSessionStorageError.schemaMismatch(
            table: name,
            expected: expected,
            found: found[name, default: []]
          )
        }
      }
    } catch let error as PostgresSessionStorageError {
      throw error
    } catch {
      throw PostgresSessionStorageError.databaseUnavailable(describing(error))
    }
  }

  /// Runs `query` on a connection, waiting at most ``connectionWait`` for one; its rows.
  @discardableResult
  func query(_ query: PostgresQuery) async throws -> [PostgresRow] {
    let logger = self.logger
    return try await self.client.withConnection(
      within: self.connectionWait,
      answeringWithin: self.answerWait
    ) { connection in
      try await connection.query(query, logger: logger).collect()
    }
  }

  /// The advisory lock that keeps statements over many rows from deadlocking.
  ///
  /// Saves and releases each lock many rows in one statement, in whatever order the plan visits
  /// them, and they run at once (a group commit's saves, a passivation's release, in every
  /// instance): two of them can wait on each other's rows, and PostgreSQL then aborts one (a
  /// customer's 503). Saves hold this lock shared (theirs never overlap: a key is in one save at
  /// a time); a release holds it alone, before it locks any row, for one statement. A statement
  /// that locks one row (an acquisition, an erasure) cannot close a cycle and does not take it.
  var rowsLock: String { "unidirectional.rows." + self.table }

  /// The call setting `lock_timeout` to ``lockWait``, for its statement's transaction only.
  ///
  /// The client's other users keep theirs. Every locking statement makes the call in a subquery
  /// it reads first, as a `FROM` item or a CTE, so it is in force before any lock. Literal SQL:
  /// the value is a number.
  var lockWaitSetting: String { Self.lockTimeoutSetting(self.lockWait) }

  /// The `lock_timeout` a release waits for a row, short.
  ///
  /// Holding the table's lock alone, it finds a row locked only by a statement over one row or
  /// by someone else's transaction, and while it waits, every save waits for it.
  var leaseRowWaitSetting: String {
    Self.lockTimeoutSetting(min(self.lockWait, .milliseconds(100)))
  }

  /// The `lock_timeout` a release waits for the table's lock alone (``exclusiveGate``).
  var leaseGateWaitSetting: String {
    Self.lockTimeoutSetting(min(self.lockWait, .seconds(1)))
  }

  private static func lockTimeoutSetting(_ wait: Duration) -> String {
    let (seconds, attoseconds) = wait.components
    let milliseconds = max(1, seconds * 1_000 + attoseconds / 1_000_000_000_000_000)
    return "set_config('lock_timeout', '\(milliseconds)', true)"
  }

  var leaseMilliseconds: Int64 {
    let (seconds, attoseconds) = self.leaseDuration.components
    return seconds * 1_000 + attoseconds / 1_000_000_000_000_000
  }

  func text(_ key: Key) throws -> String {
    let text = "\(key)"
    guard text.utf8.count <= Self.maximumKeyLength else {
      throw PostgresSessionStorageError.keyTooLong(
        key: String(text.prefix(64)),
        length: text.utf8.count
      )
    }
    // NB: PostgreSQL's text holds no NUL; said here, not as the server's encoding error.
    guard !text.utf8.contains(0) else {
      throw PostgresSessionStorageError.keyContainsNUL(key: String(text.prefix(64)))
    }
    return text
  }

  /// Takes `key`'s lease for `owner` (free, expired or already `owner`'s) and loads its state.
  ///
  /// One statement; a state that cannot be read gives the lease back. Every acquisition takes a
  /// new fencing token, the owner's own too: a save of its earlier activation that was given up
  /// on (no answer in time) but reaches the database later is refused, not written over what
  /// this activation saves. A token is a bit pattern: past the largest `int8` it wraps.
  public func acquire(
    _ key: Key,
    owner: String,
    address: String?
  ) async throws -> SessionAcquisition<State> {
    let text = try self.text(key)
    let lease = self.leaseMilliseconds
    var acquired: (token: Int64, state: ByteBuffer?, version: Int32, keys: ByteBuffer?)?
    do {
      // NB: a lease let go (or run out) between the taking and the look at its holder is taken
      // again, a few times at most: "held by nobody" could not be forwarded anywhere.
      attempts: for _ in 0..<3 {
        let rows = try await self.query(
          """
          INSERT INTO \(unescaped: self.table) AS t (key, owner, owner_address, lease_expires_at, token)
          SELECT \(text), \(owner), \(address), now() + \(lease) * interval '1 millisecond',
            \(Int64(bitPattern: Self.firstLeaseToken()))
          FROM (SELECT \(unescaped: self.lockWaitSetting)) AS settings
          ON CONFLICT (key) DO UPDATE SET
            token = CASE WHEN t.token = 9223372036854775807 THEN -9223372036854775808
              ELSE t.token + 1 END,
            owner = excluded.owner,
            owner_address = excluded.owner_address,
            lease_expires_at = excluded.lease_expires_at
          WHERE t.owner IS NULL OR t.owner = excluded.owner OR \(unescaped: self.leaseHasLapsed)
          RETURNING t.token, t.state, t.encoding_version, t.idempotency_keys
          """
        )
        for row in try rows.decoded((Int64, ByteBuffer?, Int32, ByteBuffer?).self) {
          acquired = (token: row.0, state: row.1, version: row.2, keys: row.3)
        }
        if acquired != nil { break attempts }
        let owners = try await self.query(
          """
          SELECT t.owner, t.owner_address,
            (extract(epoch FROM least(\(unescaped: self.leaseHoldsUntil), now() + interval '365 days')
              - now()) * 1000)::int8
          FROM \(unescaped: self.table) AS t WHERE t.key = \(text)
          """
        )
        // NB: at most a year left: a row may hold any expiry, even an infinite one.
        for (holder, address, left) in try owners.decoded((String?, String?, Int64).self) {
          guard let holder, left > 0 else { continue attempts }
          return .heldBy(owner: holder, address: address, expiresIn: .milliseconds(left))
        }
      }
    } catch {
      throw PostgresSessionStorageError.databaseUnavailable(describing(error))
    }
    guard let acquired else { return .heldBy(owner: "another owner") }
    guard let state = acquired.state else {
      return .acquired(token: UInt64(bitPattern: acquired.token), state: nil)
    }
    do {
      let decoded = try self.readState(
        text,
        version: Int(acquired.version),
        data: Data(buffer: state)
      )
      let record = try acquired.keys.map { buffer in
        guard let record = IdempotencyRecord(bytes: Array(buffer.readableBytesView)) else {
          throw RecordUnreadable(size: buffer.readableBytes)
        }
        return record
      }
      return .acquired(
        token: UInt64(bitPattern: acquired.token),
        state: decoded,
        idempotency: record ?? IdempotencyRecord()
      )
    } catch {
      // NB: the lease is given back, so another instance is not kept waiting on a key nobody
      // can serve; the stored state is left as it is.
      try? await self.release(
        [SessionLease(key: key, token: UInt64(bitPattern: acquired.token))],
        owner: owner
      )
      if let error = error as? SessionStateUnreadable { throw error }
      throw SessionStateUnreadable(
        key: text,
        storedVersion: Int(acquired.version),
        reason: "its idempotency record does not read: \(error)"
      )
    }
  }

  /// Reads `key`'s stored state without taking its lease; writes nothing.
  public func load(_ key: Key) async throws -> State? {
    let text = try self.text(key)
    var stored: (ByteBuffer?, Int32)?
    do {
      let rows = try await self.query(
        "SELECT state, encoding_version FROM \(unescaped: self.table) WHERE key = \(text)"
      )
      for row in try rows.decoded((ByteBuffer?, Int32).self) { stored = row }
    } catch {
      throw PostgresSessionStorageError.databaseUnavailable(describing(error))
    }
    guard let (state, version) = stored, let state else { return nil }
    return try self.readState(text, version: Int(version), data: Data(buffer: state))
  }

  /// Deletes `key`'s row under `owner`'s lease (or, with no token, while no other owner holds an
  /// unexpired one), in one statement.
  public func erase(_ key: Key, token: UInt64?, owner: String) async throws -> SessionSaveResult {
    let text = try self.text(key)
    do {
      // NB: one statement for both fences: with a token, `owner`'s lease under it; without, no
      // other owner's unexpired lease.
      let token = token.map { Int64(bitPattern: $0) }
      let rows = try await self.query(
        """
        WITH settings AS (SELECT \(unescaped: self.lockWaitSetting)),
        gone AS (
          DELETE FROM \(unescaped: self.table) AS t
          WHERE EXISTS (SELECT FROM settings) AND t.key = \(text) AND CASE
            WHEN \(token)::int8 IS NULL
              THEN t.owner IS NULL OR t.owner = \(owner) OR \(unescaped: self.leaseHasLapsed)
            ELSE t.token = \(token)::int8 AND t.owner = \(owner)
          END
          RETURNING t.key
        )
        SELECT (SELECT count(*) FROM gone)::int8,
          (SELECT count(*) FROM \(unescaped: self.table) WHERE key = \(text))::int8,
          (SELECT owner FROM \(unescaped: self.table) WHERE key = \(text))
        """
      )
      for (deleted, rows, holder) in try rows.decoded((Int64, Int64, String?).self) {
        // NB: the statement's snapshot still sees the deleted row: a deletion answers for itself.
        if deleted == 1 || rows == 0 { return .saved }
        return .staleToken(currentOwner: holder)
      }
      return .saved
    } catch {
      throw PostgresSessionStorageError.databaseUnavailable(describing(error))
    }
  }

  /// Reads a stored row as the app's `State`: decoded, migrated, or refused.
  private func readState(_ key: String, version: Int, data: Data) throws -> State {
    try StoredState(version: version, bytes: Array(data)) { type, bytes in
      try JSONDecoder().decode(type, from: Data(bytes))
    }
    .read(as: State.self, key: key, currentVersion: self.stateVersion, migrate: self.migrate)
  }

  /// Saves the batch in one statement; a write whose token is stale is refused, and one that does
  /// not encode or is past ``maximumStateSize`` is refused on its own.
  public func save(
    _ writes: [SessionWrite<Key, State>],
    owner: String
  ) async throws
    -> [SessionSaveResult]
  {
    let encoder = JSONEncoder()
    var refusals: [Int: String] = [:]
    var keys: [String] = []
    var states: [ByteBuffer] = []
    // NB: postgres-nio binds no arrays of optionals: an empty record stands for "unchanged" (a
    // window is written only once it took a key, so a written one is never empty).
    var windows: [ByteBuffer] = []
    var tokens: [Int64] = []
    for (index, write) in writes.enumerated() {
      do {
        let key = try self.text(write.key)
        let data = try encoder.encode(write.state)
        guard data.count <= Self.maximumStateSize else {
          throw PostgresSessionStorageError.stateTooLarge(key: key, size: data.count)
        }
        keys.append(key)
        states.append(ByteBuffer(data: data))
        windows.append(ByteBuffer(bytes: write.idempotency?.bytes ?? []))
        tokens.append(Int64(bitPattern: write.token))
      } catch {
        refusals[index] = "\(error)"
      }
    }
    var saved = Set<String>()
    var current: [String: String] = [:]
    do {
      if !keys.isEmpty {
        let rows = try await self.query(
          """
          WITH gate AS (
            SELECT pg_advisory_xact_lock_shared(hashtext(\(self.rowsLock)))
            FROM (SELECT \(unescaped: self.lockWaitSetting)) AS settings
          )
          UPDATE \(unescaped: self.table) AS t
          SET state = v.state, encoding_version = \(Int32(self.stateVersion)),
            idempotency_keys = coalesce(nullif(v.keys, ''::bytea), t.idempotency_keys),
            lease_expires_at = greatest(t.lease_expires_at, now() + \(self.leaseMilliseconds)
              * interval '1 millisecond')
          FROM UNNEST(\(keys)::text[], \(states)::bytea[], \(windows)::bytea[], \(tokens)::int8[])
            AS v(key, state, keys, token)
          WHERE t.key = v.key AND t.token = v.token AND t.owner = \(owner) AND EXISTS (SELECT FROM gate)
          RETURNING t.key
          """
        )
        for key in try rows.decoded(String.self) { saved.insert(key) }
      }
      let stale = keys.filter { !saved.contains($0) }
      if !stale.isEmpty {
        let owners = try await self.query(
          "SELECT key, owner FROM \(unescaped: self.table) WHERE key = ANY(\(stale)::text[])"
        )
        for (key, holder) in try owners.decoded((String, String?).self) {
          if let holder { current[key] = holder }
        }
      }
    } catch {
      throw PostgresSessionStorageError.databaseUnavailable(describing(error))
    }
    var written = keys.makeIterator()
    return writes.indices.map { index in
      if let reason = refusals[index] { return .refused(reason: reason) }
      let key = written.next() ?? ""
      return saved.contains(key) ? .saved : .staleToken(currentOwner: current[key])
    }
  }

  /// The state stored for `key`, read directly (for tools and tests).
  public func storedState(for key: Key) async throws -> State? {
    let text = try self.text(key)
    let rows = try await self.query(
      "SELECT state FROM \(unescaped: self.table) WHERE key = \(text)"
    )
    for state in try rows.decoded(ByteBuffer?.self) {
      guard let state else { return nil }
      return try JSONDecoder().decode(State.self, from: Data(buffer: state))
    }
    return nil
  }
}

/// A stored idempotency record that is not a whole number of digests.
private struct RecordUnreadable: Error, CustomStringConvertible {
  let size: Int
  var description: String { "it is \(self.size) bytes, not a whole number of digests" }
}

/// Whether `error` is PostgreSQL's `lock_timeout` firing (SQLSTATE 55P03).
func isLockTimeout(_ error: any Error) -> Bool {
  (error as? PSQLError)?.serverInfo?[.sqlState] == "55P03"
}

/// `PSQLError`'s description is only "Database error": the reflection names the cause.
func describing(_ error: any Error) -> String {
  if let error = error as? PSQLError {
    let message = error.serverInfo?[.message] ?? ""
    let state = error.serverInfo?[.sqlState] ?? ""
    if !message.isEmpty { return "\(message) (SQLSTATE \(state))" }
    return String(reflecting: error)
  }
  return String(reflecting: error)
}

import Foundation
import GRDB
import Logging
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
/// - Each batch of saves is one transaction. A state past ``maximumStateSize`` (or that does not
///   encode) is refused on its own; the rest of the batch is saved.
/// - A state is stored as JSON with the app's `stateVersion` and the session's idempotency keys. An
///   older state is migrated on activation (by the `migrate` closure) and written at the current
///   version by its next save; a newer one, or one that does not decode or migrate, fails that
///   key's activation with ``SessionStateUnreadable`` and is left byte for byte.
/// - ``erase(_:token:owner:)`` deletes with `secure_delete` on and truncates the write-ahead log,
///   so no text of an erased session is left in the database's files.
/// - A key never saved leaves no row: reads take no lease, and a lease released with no state
///   removes its row. A row's key is the key's `String(describing:)`, so two keys must never
///   describe themselves alike.
/// - Leases expire on this machine's wall clock (an SQLite file is shared by the processes of
///   one machine). A lease holds while its row's expiry is ahead or its owner is alive: a renewal
///   writes one row for its owner in `<table>_owners`, not one per key.
public final class SQLiteSessionStorage<Key: Hashable & Sendable, State: Codable & Sendable>:
  SessionStorage
{
  /// The longest key this storage takes, in UTF-8 bytes.
  public static var maximumKeyLength: Int { 1_024 }
  /// The largest encoded state this storage takes, in bytes.
  public static var maximumStateSize: Int { 16 * 1_024 * 1_024 }

  /// How long a lease lasts without renewal.
  public let leaseDuration: Duration
  /// Two saves in flight: while one commits, the next takes and encodes its batch and queues
  /// behind it, so the writer goes from one transaction to the next with no gap.
  public var concurrentSaves: Int { 2 }
  /// The database file.
  public let path: String
  /// The version of `State` this app reads and writes; rows are stored with it.
  public let stateVersion: Int
  private let migrate: (@Sendable (StoredState) throws -> State)?
  let pool: DatabasePool
  private let turn = WriterTurn()
  let table: String
  let logger: Logger

  /// Opens (or creates) the database at `path`, and creates or checks its table.
  ///
  /// - Parameters:
  ///   - path: The database file.
  ///   - table: The table's name (letters, digits and `_`).
  ///   - leaseDuration: How long a lease lasts without renewal.
  ///   - stateVersion: The version of `State` this app reads and writes (1 for the first; raise it
  ///     when `State`'s encoding changes, and give `migrate`).
  ///   - logger: Where the storage logs what it changes (a table upgraded, a session erased); none
  ///     by default.
  ///   - migrate: Turns a state stored at an older version into the current one; `nil` refuses
  ///     older states (their keys' sends throw ``SessionError/stateUnreadable(key:storedVersion:message:)``).
  /// - Throws: ``SQLiteSessionStorageError`` when the file cannot be opened or the table's
  ///   schema differs from the expected one (the difference is named).
  public init(
    path: String,
    table: String = "sessions",
    leaseDuration: Duration = .seconds(10),
    stateVersion: Int = 1,
    logger: Logger = Logger(
      label: "unidirectional.sqlite",
      factory: { _ in SwiftLogNoOpLogHandler() }
    ),
    migrate: (@Sendable (StoredState) throws -> State)? = nil
  ) async throws {
    guard table.range(of: "^[A-Za-z_][A-Za-z0-9_]{0,62}$", options: .regularExpression) != nil
    else {
      throw SQLiteSessionStorageError.invalidTable(table)
    }
    guard stateVersion >= 1 else {
      throw SQLiteSessionStorageError.invalidStateVersion(stateVersion)
    }
    guard leaseDuration > .zero else {
      throw SQLiteSessionStorageError.invalidLeaseDuration(leaseDuration)
    }
    self.path = path
    self.table = table
    self.leaseDuration = leaseDuration
    self.stateVersion = stateVersion
    self.migrate = migrate
    self.logger = logger
    self.pool = try await Self.open(path)
    try await self.createOrCheckSchema()
  }

  /// Opens the file as a pool in WAL mode, retrying while another process holds the lock that
  /// setting WAL mode takes: processes started together on a new file each try to set it, and
  /// SQLite answers "database is locked" at once rather than waiting out its busy timeout.
  private static func open(_ path: String) async throws -> DatabasePool {
    var pause = Duration.milliseconds(5)
    let deadline = ContinuousClock.now + .seconds(10)
    while true {
      do {
        return try await Self.openOnce(path)
      } catch let error as DatabaseError
        where [.SQLITE_BUSY, .SQLITE_LOCKED].contains(error.resultCode)
        && ContinuousClock.now < deadline
      {
        try await Task.sleep(for: pause)
        pause = min(pause * 2, .milliseconds(200))
      } catch {
        throw SQLiteSessionStorageError.cannotOpen(path: path, underlying: "\(error)")
      }
    }
  }

  private static func openOnce(_ path: String) async throws -> DatabasePool {
    var configuration = Configuration()
    // NB: processes sharing the file take turns writing: a write waits for another's instead of
    // failing at once with "database is locked" (which failed saves, so stores were discarded
    // and their leases released, under two instances' load).
    configuration.busyMode = .timeout(10)
    // NB: an erased session's bytes are overwritten, not left in free pages.
    configuration.prepareDatabase { db in try db.execute(sql: "PRAGMA secure_delete = ON") }
    let pool = try DatabasePool(path: path, configuration: configuration)
    try await pool.writeWithoutTransaction { db in
      try db.execute(sql: "PRAGMA synchronous = FULL")
    }
    return pool
  }

  /// The columns of the first release's table: upgraded in place by adding what came since.
  private static var firstColumns: [String] {
    [
      "key TEXT", "state BLOB", "encoding_version INTEGER", "owner TEXT", "lease_expiry REAL",
      "token INTEGER",
    ]
  }

  /// The columns added since the first release, in order.
  private static var addedColumns: [String] { ["idempotency_keys BLOB", "owner_address TEXT"] }

  private static var columns: [String] { Self.firstColumns + Self.addedColumns }

  private func createOrCheckSchema() async throws {
    let table = self.table
    // NB: one write transaction: processes opening one file at once create or upgrade it once.
    let found = try await self.pool.write { db -> [String] in
      try db.execute(
        sql: """
          CREATE TABLE IF NOT EXISTS \(table) (
            key TEXT PRIMARY KEY NOT NULL,
            state BLOB,
            encoding_version INTEGER NOT NULL DEFAULT 1,
            owner TEXT,
            lease_expiry REAL NOT NULL DEFAULT 0,
            token INTEGER NOT NULL DEFAULT 0,
            idempotency_keys BLOB,
            owner_address TEXT
          )
          """
      )
      // An earlier release's table has a prefix of the columns: the rest are added, rows kept.
      let found = try Self.columns(of: table, in: db)
      guard found.count < Self.columns.count, Array(Self.columns.prefix(found.count)) == found,
        found.count >= Self.firstColumns.count
      else { return found }
      for column in Self.columns.dropFirst(found.count) {
        try db.execute(sql: "ALTER TABLE \(table) ADD COLUMN \(column)")
        self.logger.notice(
          "upgraded the sessions table",
          metadata: ["table": "\(table)", "column": "\(column)"]
        )
      }
      return try Self.columns(of: table, in: db)
    }
    try await self.createOrCheckOwnersTable()
    guard found == Self.columns else {
      throw SQLiteSessionStorageError.schemaMismatch(
        table: table,
        expected: Self.columns,
        found: found
      )
    }
  }

  static func columns(of table: String, in db: Database) throws -> [String] {
    try Row.fetchAll(db, sql: "PRAGMA table_info(\(table))").map {
      "\(($0["name"] as String?) ?? "") \((($0["type"] as String?) ?? "").uppercased())"
    }
  }

  /// Reads a stored row as the app's `State`: decoded, migrated, or refused.
  private func readState(_ key: String, version: Int, data: Data) throws -> State {
    try StoredState(version: version, bytes: Array(data)) { type, bytes in
      try JSONDecoder().decode(type, from: Data(bytes))
    }
    .read(as: State.self, key: key, currentVersion: self.stateVersion, migrate: self.migrate)
  }

  var now: Double { Date().timeIntervalSince1970 }

  var leaseSeconds: Double {
    let (seconds, attoseconds) = self.leaseDuration.components
    return Double(seconds) + Double(attoseconds) / 1e18
  }

  func text(_ key: Key) throws -> String {
    let text = "\(key)"
    guard text.utf8.count <= Self.maximumKeyLength else {
      throw SQLiteSessionStorageError.keyTooLong(
        key: String(text.prefix(64)),
        length: text.utf8.count
      )
    }
    return text
  }

  /// Takes `key`'s lease for `owner` and loads its state, in one transaction: a state that cannot
  /// be read rolls the lease back too.
  public func acquire(
    _ key: Key,
    owner: String,
    address: String?
  ) async throws -> SessionAcquisition<State> {
    let text = try self.text(key)
    let (table, now, lease) = (self.table, self.now, self.leaseSeconds)
    // NB: a key another owner holds is answered from a read (in WAL mode reads never wait), so an
    // instance that forwards does not take the file's one write lock for it.
    let holder = try await self.pool.read { db -> (String, String?, Double)? in
      let row = try Row.fetchOne(
        db,
        sql: "SELECT owner, owner_address, \(self.leaseColumns) FROM \(table) AS t WHERE key = ?",
        arguments: [text]
      )
      guard let row, let current: String = try row.stored("owner", of: text), current != owner
      else { return nil }
      let expiry = try Self.heldUntil(row, of: text)
      return expiry > now ? (current, try row.stored("owner_address", of: text), expiry) : nil
    }
    if let (current, address, expiry) = holder {
      return .heldBy(
        owner: current,
        address: address,
        expiresIn: Self.timeLeft(until: expiry, now: now)
      )
    }
    return try await self.pool.write { db -> SessionAcquisition<State> in
      let current = try Row.fetchOne(
        db,
        sql: """
          SELECT owner, owner_address, \(self.leaseColumns), token, state, encoding_version,
            idempotency_keys
          FROM \(table) AS t WHERE key = ?
          """,
        arguments: [text]
      )
      let currentOwner: String? = try current?.stored("owner", of: text)
      let expiry = try current.map { try Self.heldUntil($0, of: text) } ?? 0
      let stored: Int64? = try current?.stored("token", of: text)
      if let currentOwner, currentOwner != owner, expiry > now {
        return .heldBy(
          owner: currentOwner,
          address: try current?.stored("owner_address", of: text),
          expiresIn: Self.timeLeft(until: expiry, now: now)
        )
      }
      var state: State?
      var idempotency = IdempotencyRecord()
      if let current, let data: Data = try current.stored("state", of: text) {
        let version: Int = try current.stored("encoding_version", of: text) ?? 1
        state = try self.readState(text, version: version, data: data)
        idempotency = try Self.readRecord(
          try current.stored("idempotency_keys", of: text),
          of: text
        )
      }
      // Every acquisition is a new lease, the same owner's too: two instances under one owner
      // name then refuse each other's saves instead of writing over them. A token is a bit
      // pattern (whatever a row holds, negative or the largest, is one), so it wraps.
      let token = stored.map { $0 &+ 1 } ?? Int64(bitPattern: Self.firstLeaseToken())
      try db.execute(
        sql: """
          INSERT INTO \(table) (key, owner, owner_address, lease_expiry, token)
          VALUES (?, ?, ?, ?, ?)
          ON CONFLICT(key) DO UPDATE SET owner = excluded.owner,
            owner_address = excluded.owner_address, lease_expiry = excluded.lease_expiry,
            token = excluded.token
          """,
        arguments: [text, owner, address, now + lease, token]
      )
      return .acquired(token: UInt64(bitPattern: token), state: state, idempotency: idempotency)
    }
  }

  /// The time a lease expiring at `expiry` has left, at most a year: a row may hold any expiry
  /// (one another program wrote, even an infinite one), and a `Duration` of it must not trap.
  private static func timeLeft(until expiry: Double, now: Double) -> Duration {
    .milliseconds(Int64(min(expiry - now, 365 * 86_400) * 1_000))
  }

  /// Reads `key`'s stored state without taking its lease; writes nothing.
  public func load(_ key: Key) async throws -> State? {
    let text = try self.text(key)
    let table = self.table
    let stored = try await self.pool.read { db -> (Data, Int)? in
      let row = try Row.fetchOne(
        db,
        sql: "SELECT state, encoding_version FROM \(table) WHERE key = ?",
        arguments: [text]
      )
      guard let row, let data: Data = try row.stored("state", of: text) else { return nil }
      return (data, try row.stored("encoding_version", of: text) ?? 1)
    }
    guard let (data, version) = stored else { return nil }
    return try self.readState(text, version: version, data: data)
  }

  /// Deletes `key`'s row under `owner`'s lease (or, with no token, while no other owner holds an
  /// unexpired one), then truncates the write-ahead log so its bytes leave the files too.
  public func erase(_ key: Key, token: UInt64?, owner: String) async throws -> SessionSaveResult {
    let text = try self.text(key)
    let (table, now) = (self.table, self.now)
    let result = try await self.pool.write { db -> SessionSaveResult in
      if let token {
        try db.execute(
          sql: "DELETE FROM \(table) WHERE key = ? AND token = ? AND owner = ?",
          arguments: [text, Int64(bitPattern: token), owner]
        )
      } else {
        try db.execute(
          sql: """
            DELETE FROM \(table) AS t
            WHERE key = ? AND (owner IS NULL OR owner = ? OR \(self.leaseHasLapsed))
            """,
          arguments: [text, owner, now, now]
        )
      }
      if db.changesCount == 1 { return .saved }
      let holder = try Row.fetchOne(
        db,
        sql: "SELECT owner FROM \(table) WHERE key = ?",
        arguments: [text]
      )
      guard let holder else { return .saved }
      return .staleToken(currentOwner: try? holder.stored("owner", of: text))
    }
    if result == .saved {
      // NB: the log still holds the pages as they were before the delete until it is truncated.
      try await self.pool.writeWithoutTransaction { db in
        try db.execute(sql: "PRAGMA wal_checkpoint(TRUNCATE)")
      }
    }
    return result
  }

  private static func readRecord(_ data: Data?, of key: String) throws -> IdempotencyRecord {
    guard let data else { return IdempotencyRecord() }
    guard let record = IdempotencyRecord(bytes: Array(data)) else {
      throw SessionStateUnreadable(
        key: key,
        storedVersion: nil,
        reason: "its idempotency record is \(data.count) bytes, not a whole number of digests"
      )
    }
    return record
  }

  /// Saves the batch in one transaction; a write whose token is stale is refused, and one that
  /// does not encode or is past ``maximumStateSize`` is refused on its own.
  public func save(
    _ writes: [SessionWrite<Key, State>],
    owner: String
  ) async throws
    -> [SessionSaveResult]
  {
    let rows = self.encode(writes)
    return try await self.pool.write { db in try self.write(rows, owner: owner, in: db) }
  }

  /// Saves the batch `take` returns in one transaction, taking it once the save before this one
  /// starts to commit.
  ///
  /// SQLite has one writer. A batch taken while another save holds it would leave out every state
  /// that arrives meanwhile; one taken only once the writer is free would be encoded while the
  /// writer waits. Taken as the save ahead starts its commit, a batch is encoded while that commit
  /// waits for the disk, and holds every state that arrived until then.
  public func save(
    owner: String,
    taking take: @Sendable () -> [SessionWrite<Key, State>]
  ) async throws
    -> [SessionSaveResult]
  {
    let turn = await self.turn.acquire()
    defer { turn.release() }
    let writes = take()
    guard !writes.isEmpty else { return [] }
    let rows = self.encode(writes)
    return try await self.pool.writeWithoutTransaction { db in
      var results: [SessionSaveResult] = []
      try db.inTransaction {
        results = try self.write(rows, owner: owner, in: db)
        // NB: the next save takes and encodes its batch while this one commits.
        turn.release()
        return .commit
      }
      return results
    }
  }

  /// Each write as the row it stores, or why it is refused.
  private func encode(
    _ writes: [SessionWrite<Key, State>]
  ) -> [Result<(String, Data, Data?, Int64), Refusal>] {
    let encoder = JSONEncoder()
    return writes.map { write in
      Result {
        let key = try self.text(write.key)
        let data = try encoder.encode(write.state)
        guard data.count <= Self.maximumStateSize else {
          throw SQLiteSessionStorageError.stateTooLarge(key: key, size: data.count)
        }
        let record = write.idempotency.map { Data($0.bytes) }
        return (key, data, record, Int64(bitPattern: write.token))
      }
      .mapError { Refusal(reason: "\($0)") }
    }
  }

  private func write(
    _ rows: [Result<(String, Data, Data?, Int64), Refusal>],
    owner: String,
    in db: Database
  ) throws -> [SessionSaveResult] {
    let update = try db.cachedStatement(
      sql: """
        UPDATE \(self.table)
        SET state = ?, encoding_version = ?, idempotency_keys = coalesce(?, idempotency_keys),
          lease_expiry = max(lease_expiry, ?)
        WHERE key = ? AND token = ? AND owner = ?
        """
    )
    // NB: a save moves its row's expiry on, so a release before owners' liveness, running beside
    // this one in a rolling deploy, sees a key in use as held.
    let expiry = self.now + self.leaseSeconds
    return try rows.map { row -> SessionSaveResult in
      let key: String
      switch row {
      case .failure(let refusal):
        return .refused(reason: refusal.reason)
      case .success(let (text, data, keys, token)):
        key = text
        try update.execute(arguments: [data, self.stateVersion, keys, expiry, text, token, owner])
      }
      if db.changesCount == 1 { return .saved }
      let current = try Row.fetchOne(
        db,
        sql: "SELECT owner FROM \(self.table) WHERE key = ?",
        arguments: [key]
      )
      // NB: an owner of another type is no owner to name; the batch's other writes stand.
      return .staleToken(currentOwner: try? current?.stored("owner", of: key))
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

/// Why one write of a batch was refused.
private struct Refusal: Error {
  let reason: String
}

/// What went wrong with an ``SQLiteSessionStorage``.
public enum SQLiteSessionStorageError: Error, CustomStringConvertible {
  /// The table name is not a plain identifier.
  case invalidTable(String)
  /// A state version below 1.
  case invalidStateVersion(Int)
  /// A lease duration that is not positive.
  case invalidLeaseDuration(Duration)
  /// The database file could not be opened or set up.
  case cannotOpen(path: String, underlying: String)
  /// The table exists with other columns.
  case schemaMismatch(table: String, expected: [String], found: [String])
  /// A key longer than ``SQLiteSessionStorage/maximumKeyLength``.
  case keyTooLong(key: String, length: Int)
  /// A state larger than ``SQLiteSessionStorage/maximumStateSize`` once encoded.
  case stateTooLarge(key: String, size: Int)

  /// What went wrong, and what to do.
  public var description: String {
    switch self {
    case .invalidTable(let table):
      "'\(table)' is not a valid table name (letters, digits and '_', at most 63)"
    case .invalidStateVersion(let version):
      "the state version must be at least 1, not \(version)"
    case .invalidLeaseDuration(let duration):
      "the lease duration must be positive, not \(duration)"
    case .cannotOpen(let path, let underlying):
      "cannot open the SQLite database at '\(path)': \(underlying)"
    case .schemaMismatch(let table, let expected, let found):
      """
      the table '\(table)' has columns [\(found.joined(separator: ", "))]; expected \
      [\(expected.joined(separator: ", "))]: use another table, or migrate this one
      """
    case .keyTooLong(let key, let length):
      "the key '\(key)…' is \(length) bytes long; SQLite sessions take keys up to 1024 bytes"
    case .stateTooLarge(let key, let size):
      "the state of '\(key)' is \(size) bytes once encoded; SQLite sessions take up to 16 MiB"
    }
  }
}

extension Row {
  /// The value of `column`; `nil` for NULL.
  ///
  /// A value of another type there (a row another program or version wrote: SQLite keeps any
  /// type in any column) throws ``SessionStateUnreadable`` naming the key and the column, where
  /// GRDB's subscript traps.
  func stored<Value: DatabaseValueConvertible>(
    _ column: String,
    of key: String
  ) throws -> Value? {
    do {
      return try self.decode(Value?.self, forColumn: column)
    } catch {
      throw SessionStateUnreadable(
        key: key,
        storedVersion: nil,
        reason: "its row's \(column) column holds a value that is not \(Value.self)"
      )
    }
  }
}

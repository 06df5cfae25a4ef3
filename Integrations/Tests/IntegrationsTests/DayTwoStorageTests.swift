import Foundation
import PostgresNIO
import Testing
import Unidirectional
import UnidirectionalPostgres
import UnidirectionalSQLite

@testable import CartServer

/// The cart as the first version of an app stored it: a count, not items.
struct LegacyCart: Reducer {
  struct State: Codable, Equatable, Sendable {
    var customer: String
    var count: Int
  }
  enum Action: Sendable { case add(Int) }
  func reduce(into state: inout State, action: Action) -> Effect<Action> {
    switch action {
    case .add(let amount): state.count &+= amount
    }
    return .none
  }
}

/// The second version's migration: a stored count becomes that many "legacy" items.
let upgradeLegacyCart: @Sendable (StoredState) throws -> Cart.State = { stored in
  let old = try stored.decode(LegacyCart.State.self)
  return Cart.State(customer: old.customer, items: ["legacy": old.count], version: 1)
}

/// What a backend needs to run the day-two contract: its storages at either version, and a look
/// at its raw rows.
struct DayTwoBackend: Sendable {
  /// The first app version's storage (state version 1, `LegacyCart`).
  var openV1: @Sendable () async throws -> any SessionStorage<String, LegacyCart.State>
  /// The second app version's storage (state version 2, `Cart`), with or without its migration.
  var openV2: @Sendable (_ migrates: Bool) async throws -> any SessionStorage<String, Cart.State>
  /// The stored state's bytes and version, `nil` when the key has no row.
  var raw: @Sendable (String) async throws -> (bytes: [UInt8]?, version: Int)?
}

func legacyCarts(
  _ storage: any SessionStorage<String, LegacyCart.State>,
  _ owner: String
)
  -> StoreRegistry<String, LegacyCart>
{
  StoreRegistry(storage: storage, owner: owner) {
    LegacyCart.State(customer: $0, count: 0)
  } reducer: {
    LegacyCart()
  }
}

func carts(_ storage: any SessionStorage<String, Cart.State>, _ owner: String) -> Carts {
  Carts(storage: storage, owner: owner) {
    Cart.State(customer: $0)
  } reducer: {
    Cart()
  }
}

/// State versions, erasure, idempotency across a restart, isolation of a refused state, and reads
/// that write nothing, on a real backend.
func checkDayTwoContract(_ backend: DayTwoBackend, tooLarge: Int) async throws {
  // Version 1 of the app saves two carts.
  let v1 = legacyCarts(try await backend.openV1(), "node-a")
  try await v1.send(.add(3), to: "alice")
  try await v1.send(.add(5), to: "carol")
  await v1.shutdown(gracePeriod: .seconds(1))
  #expect(try await backend.raw("alice")?.version == 1)

  // Version 2 migrates on activation and saves at version 2.
  let v2 = carts(try await backend.openV2(true), "node-a")
  #expect(try await v2.state(of: "alice").items == ["legacy": 3])
  let migrated = try await v2.send(.add(item: "pear", quantity: 1), to: "alice", reading: { $0 })
  #expect(migrated.items == ["legacy": 3, "pear": 1])
  #expect(try await backend.raw("alice")?.version == 2)

  // Version 2 without a migration refuses carol's version-1 state and leaves it byte for byte.
  let strict = carts(try await backend.openV2(false), "node-s")
  let carolBefore = try await backend.raw("carol")
  let refused = await #expect(throws: SessionError.self) {
    try await strict.send(.add(item: "fig", quantity: 1), to: "carol")
  }
  guard case .stateUnreadable(let key, let version, _) = refused else {
    Issue.record("expected .stateUnreadable, got \(String(describing: refused))")
    return
  }
  #expect(key == "carol")
  #expect(version == 1)
  #expect(try await backend.raw("carol")?.bytes == carolBefore?.bytes)
  await strict.shutdown(gracePeriod: .seconds(1))

  // An instance still on version 1 meets alice's version-2 state: refused, left as it is, and
  // its other keys are served.
  try await v2.passivate("alice")
  let aliceBefore = try await backend.raw("alice")
  let old = legacyCarts(try await backend.openV1(), "node-old")
  let newer = await #expect(throws: SessionError.self) {
    try await old.send(.add(1), to: "alice")
  }
  guard case .stateUnreadable(_, let storedVersion, let message) = newer else {
    Issue.record("expected .stateUnreadable, got \(String(describing: newer))")
    return
  }
  #expect(storedVersion == 2)
  #expect(message.contains("newer version"))
  #expect(try await backend.raw("alice")?.bytes == aliceBefore?.bytes)
  try await old.send(.add(1), to: "dave")
  await old.shutdown(gracePeriod: .seconds(1))

  // Erasure: the row is gone before `erase` returns, and a reopened storage has nothing.
  try await v2.erase("alice")
  #expect(try await backend.raw("alice") == nil)
  try await v2.erase("never-seen")
  #expect(try await backend.raw("never-seen") == nil)

  // A read of a key never saved writes nothing.
  #expect(try await v2.state(of: "ghost") == Cart.State(customer: "ghost"))
  #expect(try await backend.raw("ghost") == nil)

  // An idempotent send is applied once, across a restart (a new storage and registry); a key sent
  // with its request's fingerprint refuses another request after the restart too.
  try await v2.send(.add(item: "apple", quantity: 1), to: "erin", idempotencyKey: "r1")
  try await v2.send(.remove(item: "fig"), to: "erin", idempotencyKey: "r2", fingerprint: "fig")
  await v2.shutdown(gracePeriod: .seconds(1))
  let restarted = carts(try await backend.openV2(true), "node-b")
  let retried = try await restarted.send(
    .add(item: "apple", quantity: 1),
    to: "erin",
    idempotencyKey: "r1",
    reading: { $0 }
  )
  #expect(retried.items == ["apple": 1])
  await #expect(throws: IdempotencyKeyReused.self) {
    try await restarted.send(
      .remove(item: "apple"),
      to: "erin",
      idempotencyKey: "r2",
      fingerprint: "apple"
    )
  }
  let replayed = try await restarted.send(
    .remove(item: "fig"),
    to: "erin",
    idempotencyKey: "r2",
    fingerprint: "fig",
    reading: { $0 }
  )
  #expect(replayed.items == ["apple": 1])

  // One cart past the backend's size limit fails alone; 16 others in the same batches save; the
  // big cart reads as its last acknowledged state.
  try await restarted.send(.add(item: "small", quantity: 1), to: "big")
  let huge = String(repeating: "x", count: tooLarge)
  try await withThrowingTaskGroup(of: Void.self) { group in
    for index in 0..<16 {
      group.addTask {
        for round in 1...3 {
          let cart = try await restarted.send(
            .add(item: "apple", quantity: 1),
            to: "other-\(index)",
            reading: { $0 }
          )
          #expect(cart.items["apple"] == round)
        }
      }
    }
    group.addTask {
      let error = await #expect(throws: SessionError.self) {
        try await restarted.send(.add(item: huge, quantity: 1), to: "big")
      }
      #expect(error?.key == "big")
    }
    try await group.waitForAll()
  }
  #expect(try await restarted.state(of: "big").items == ["small": 1])
  let after = try await restarted.send(.add(item: "small", quantity: 1), to: "big", reading: { $0 })
  #expect(after.items == ["small": 2])
  await restarted.shutdown(gracePeriod: .seconds(1))
}

@Suite(.timeLimit(.minutes(3))) struct SQLiteDayTwoTests {
  @Test func versionsErasureIdempotencyAndIsolationHoldOnSQLite() async throws {
    let directory = try temporaryDirectory()
    defer { try? FileManager.default.removeItem(at: directory) }
    let path = directory.appendingPathComponent("carts.sqlite").path
    let backend = DayTwoBackend(
      openV1: { try await SQLiteSessionStorage<String, LegacyCart.State>(path: path) },
      openV2: { migrates in
        try await SQLiteSessionStorage<String, Cart.State>(
          path: path,
          stateVersion: 2,
          migrate: migrates ? upgradeLegacyCart : nil
        )
      },
      raw: { key in try sqliteRow(path, key) }
    )
    try await checkDayTwoContract(
      backend,
      tooLarge: SQLiteSessionStorage<String, Cart.State>.maximumStateSize
    )
  }

  @Test func anErasedCartLeavesNoTextInTheDatabaseFiles() async throws {
    let directory = try temporaryDirectory()
    defer { try? FileManager.default.removeItem(at: directory) }
    let path = directory.appendingPathComponent("carts.sqlite").path
    let storage = try await SQLiteSessionStorage<String, Cart.State>(path: path)
    let registry = carts(storage, "a")
    let secret = "secret-item-4f1c9a"
    try await registry.send(.add(item: secret, quantity: 1), to: "private-customer-7d2e")
    try await registry.send(.add(item: "apple", quantity: 1), to: "bob")
    try await registry.erase("private-customer-7d2e")
    for suffix in ["", "-wal"] {
      guard let bytes = FileManager.default.contents(atPath: path + suffix) else { continue }
      #expect(bytes.range(of: Data(secret.utf8)) == nil, "\(suffix.isEmpty ? "db" : suffix)")
      #expect(bytes.range(of: Data("private-customer-7d2e".utf8)) == nil)
    }
    #expect(try await storage.storedState(for: "bob")?.items == ["apple": 1])
    await registry.shutdown(gracePeriod: .seconds(1))
  }

  @Test func theFirstReleasesTableIsUpgradedInPlaceKeepingItsRows() async throws {
    let directory = try temporaryDirectory()
    defer { try? FileManager.default.removeItem(at: directory) }
    let path = directory.appendingPathComponent("carts.sqlite").path
    try sqlite(
      path,
      """
      CREATE TABLE sessions (key TEXT PRIMARY KEY NOT NULL, state BLOB,
        encoding_version INTEGER NOT NULL DEFAULT 1, owner TEXT,
        lease_expiry REAL NOT NULL DEFAULT 0, token INTEGER NOT NULL DEFAULT 0)
      """
    )
    try sqlite(
      path,
      """
      INSERT INTO sessions (key, state, token) VALUES ('alice',
        CAST('{"customer":"alice","items":{"apple":2},"version":1}' AS BLOB), 3)
      """
    )
    try await expectTheUpgradedRowIsServed(
      try await SQLiteSessionStorage<String, Cart.State>(path: path)
    )
  }
}

@Suite(
  .timeLimit(.minutes(3)),
  .enabled(
    if: postgresURL != nil,
    "POSTGRES_URL is not set: no PostgreSQL to test against (.ci/run starts one)"
  )
)
struct PostgresDayTwoTests {
  @Test func versionsErasureIdempotencyAndIsolationHoldOnPostgres() async throws {
    try await withPostgres { client, table in
      let backend = DayTwoBackend(
        openV1: {
          try await PostgresSessionStorage<String, LegacyCart.State>(client: client, table: table)
        },
        openV2: { migrates in
          try await PostgresSessionStorage<String, Cart.State>(
            client: client,
            table: table,
            stateVersion: 2,
            migrate: migrates ? upgradeLegacyCart : nil
          )
        },
        raw: { key in
          let rows = try await client.query(
            "SELECT state, encoding_version FROM \(unescaped: table) WHERE key = \(key)"
          )
          for try await (state, version) in rows.decode((ByteBuffer?, Int32).self) {
            return (state.map { Array($0.readableBytesView) }, Int(version))
          }
          return nil
        }
      )
      try await checkDayTwoContract(
        backend,
        tooLarge: PostgresSessionStorage<String, Cart.State>.maximumStateSize
      )
    }
  }

  @Test func theFirstReleasesTableIsUpgradedInPlaceKeepingItsRows() async throws {
    try await withPostgres { client, table in
      try await client.query(
        """
        CREATE TABLE \(unescaped: table) (key text PRIMARY KEY, state bytea,
          encoding_version integer NOT NULL DEFAULT 1, owner text,
          lease_expires_at timestamptz NOT NULL DEFAULT 'epoch', token bigint NOT NULL DEFAULT 0)
        """
      )
      let state = ByteBuffer(string: #"{"customer":"alice","items":{"apple":2},"version":1}"#)
      try await client.query(
        "INSERT INTO \(unescaped: table) (key, state, token) VALUES ('alice', \(state), 3)"
      )
      try await expectTheUpgradedRowIsServed(
        try await PostgresSessionStorage<String, Cart.State>(client: client, table: table)
      )
    }
  }

  @Test func instancesStartingTogetherOnANewDatabaseAllStart() async throws {
    try await withPostgres { client, table in
      // Separate clients, as separate processes have.
      guard let url = postgresURL else { return }
      try await withThrowingTaskGroup(of: Void.self) { group in
        for _ in 0..<6 {
          group.addTask {
            let own = PostgresClient(configuration: postgresConfiguration(url))
            let run = Task { await own.run() }
            defer { run.cancel() }
            _ = try await PostgresSessionStorage<String, Cart.State>(client: own, table: table)
          }
        }
        try await group.waitForAll()
      }
      _ = client
    }
  }
}

/// A row the first release stored (alice: two apples) is served by a storage that upgraded its
/// table.
func expectTheUpgradedRowIsServed(_ storage: any SessionStorage<String, Cart.State>) async throws {
  let registry = carts(storage, "a")
  let cart = try await registry.send(.add(item: "pear", quantity: 1), to: "alice", reading: { $0 })
  #expect(cart.items == ["apple": 2, "pear": 1])
  await registry.shutdown(gracePeriod: .seconds(1))
}

/// The state and state version of `key`'s row in an SQLite file, read by Python's sqlite3.
func sqliteRow(_ path: String, _ key: String) throws -> (bytes: [UInt8]?, version: Int)? {
  let process = Process()
  let output = Pipe()
  process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
  process.arguments = [
    "python3", "-c",
    """
    import sqlite3,sys
    r=sqlite3.connect(sys.argv[1]).execute(
      'SELECT state, encoding_version FROM sessions WHERE key=?', (sys.argv[2],)).fetchone()
    print('none' if r is None else ('null' if r[0] is None else bytes(r[0]).hex()) + ' ' + str(r[1]))
    """,
    path, key,
  ]
  process.standardOutput = output
  try process.run()
  let data = output.fileHandleForReading.readDataToEndOfFile()
  process.waitUntilExit()
  let text = String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
  guard process.terminationStatus == 0 else { throw LoadError("python3 sqlite3 failed: \(text)") }
  if text == "none" { return nil }
  let parts = text.split(separator: " ")
  guard parts.count == 2, let version = Int(parts[1]) else {
    throw LoadError("unexpected row: \(text)")
  }
  if parts[0] == "null" { return (nil, version) }
  var bytes: [UInt8] = []
  var index = parts[0].startIndex
  while index < parts[0].endIndex {
    let next = parts[0].index(index, offsetBy: 2)
    bytes.append(UInt8(parts[0][index..<next], radix: 16) ?? 0)
    index = next
  }
  return (bytes, version)
}

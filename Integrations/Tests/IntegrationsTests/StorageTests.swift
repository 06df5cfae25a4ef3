import Foundation
import Logging
import PostgresNIO
import ServiceLifecycle
import ServiceLifecycleTestKit
import Synchronization
import Testing
import Unidirectional
import UnidirectionalPostgres
import UnidirectionalSQLite

@testable import CartServer

/// A fresh temporary directory, removed by the caller.
func temporaryDirectory() throws -> URL {
  let url = FileManager.default.temporaryDirectory
    .appendingPathComponent("unidirectional-\(UUID().uuidString)")
  try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
  return url
}

/// The storage behaviour both backends share, run against each.
func checkStorageContract(
  _ makeStorage: @Sendable () async throws -> any SessionStorage<String, Cart.State>,
  corrupt: @Sendable (String) async throws -> Void,
  expire: @Sendable (String) async throws -> Void
) async throws {
  let storage = try await makeStorage()
  func registry(_ owner: String, on storage: any SessionStorage<String, Cart.State>) -> Carts {
    Carts(storage: storage, owner: owner) {
      Cart.State(customer: $0)
    } reducer: {
      Cart()
    }
  }
  func registry(_ owner: String) -> Carts { registry(owner, on: storage) }
  // NB: A's renewals can be stopped, as a paused or cut-off instance's stop: a lease of a live
  // instance that renews does not run out.
  let renewalsOfA = StoppableRenewals(storage)
  let a = registry("node-a", on: renewalsOfA)
  let b = registry("node-b")
  a.advertisedAddress = "http://127.0.0.1:9001"
  // Acknowledged is stored, and survives a new storage instance (a restart).
  try await a.send(.add(item: "apple", quantity: 2), to: "alice")
  let reopened = try await makeStorage()
  let again = try await reopened.acquire("alice", owner: "node-a", address: a.advertisedAddress)
  #expect(again.state?.items == ["apple": 2])
  // A key live in A is refused by B, naming A.
  let refused = await #expect(throws: SessionError.self) {
    try await b.send(.add(item: "pear", quantity: 1), to: "alice")
  }
  #expect(refused?.message.contains("node-a") == true)
  // The lease names where its owner is, and how long it has left.
  #expect(refused?.message.contains("http://127.0.0.1:9001") == true)
  let holder = b.owner(of: "alice")
  #expect(holder?.name == "node-a")
  #expect(holder?.address == "http://127.0.0.1:9001")
  #expect((holder?.leaseLeft ?? .zero) > .seconds(5))
  // After A's lease expires, B takes over with the last acknowledged state; A's save is refused.
  await renewalsOfA.stop()
  try await expire("alice")
  let cart = try await b.send(.add(item: "pear", quantity: 1), to: "alice", reading: { $0 })
  #expect(cart.items == ["apple": 2, "pear": 1])
  let stale = await #expect(throws: SessionError.self) {
    try await a.send(.add(item: "fig", quantity: 1), to: "alice")
  }
  guard case .ownershipLost = stale else {
    Issue.record("expected .ownershipLost, got \(String(describing: stale))")
    return
  }
  renewalsOfA.resume()
  // Passivation saves and releases: A takes the key back at once.
  try await b.passivate("alice")
  let back = try await a.send(.add(item: "kiwi", quantity: 1), to: "alice", reading: { $0 })
  #expect(back.items == ["apple": 2, "pear": 1, "kiwi": 1])
  // An instance started under A's name takes the key as a new lease: A's next save is refused,
  // not written over what the twin acknowledged.
  let twin = registry("node-a")
  let taken = try await twin.send(.add(item: "fig", quantity: 1), to: "alice", reading: { $0 })
  #expect(taken.items == ["apple": 2, "pear": 1, "kiwi": 1, "fig": 1])
  let twinned = await #expect(throws: SessionError.self) {
    try await a.send(.add(item: "plum", quantity: 1), to: "alice")
  }
  #expect(twinned?.message.contains("this instance's own owner name") == true)
  try await twin.passivate("alice")
  await twin.shutdown(gracePeriod: .seconds(1))
  let kept = try await a.send(.add(item: "plum", quantity: 1), to: "alice", reading: { $0 })
  #expect(kept.items == ["apple": 2, "pear": 1, "kiwi": 1, "fig": 1, "plum": 1])
  // A stored state that no longer decodes fails that key and is left as it is.
  try await a.send(.add(item: "apple", quantity: 1), to: "bob")
  try await a.passivate("bob")
  try await corrupt("bob")
  let unreadable = await #expect(throws: SessionError.self) {
    try await a.send(.add(item: "apple", quantity: 1), to: "bob")
  }
  guard case .stateUnreadable(let key, _, let message) = unreadable else {
    Issue.record("expected .stateUnreadable, got \(String(describing: unreadable))")
    return
  }
  #expect(key == "bob")
  #expect(message.contains("decoding it failed"))
  // A key too long is refused with a clear error.
  let long = await #expect(throws: SessionError.self) {
    try await a.send(.add(item: "apple", quantity: 1), to: String(repeating: "k", count: 2_000))
  }
  #expect(long?.message.contains("1024 bytes") == true)
  // A key erased and taken again never repeats a token of a lease from before: a save under one
  // (a store still live then) is refused, not written over the new row.
  guard case .acquired(let old, _, _) = try await storage.acquire("erin", owner: "node-c") else {
    Issue.record("erin's lease was not granted")
    return
  }
  var before = Cart.State(customer: "erin")
  before.items = ["old": 1]
  let write = SessionWrite(key: "erin", state: before, token: old)
  #expect(try await storage.save([write], owner: "node-c") == [.saved])
  #expect(try await storage.erase("erin", token: old, owner: "node-c") == .saved)
  guard case .acquired(let new, nil, _) = try await storage.acquire("erin", owner: "node-c") else {
    Issue.record("erin's lease was not granted afresh")
    return
  }
  #expect(new != old)
  let afterErasure = try await storage.save([write], owner: "node-c")
  #expect(afterErasure == [SessionSaveResult.staleToken(currentOwner: "node-c")])
  #expect(try await storage.load("erin") == nil)
  await a.shutdown(gracePeriod: .seconds(1))
  await b.shutdown(gracePeriod: .seconds(1))
}

/// A storage whose renewals can be stopped: they then fail, as a paused or cut-off instance's do.
final class StoppableRenewals: SessionStorage, Sendable {
  let base: any SessionStorage<String, Cart.State>
  /// Whether renewals are stopped, the renewals in flight, and who waits for them to end.
  private let renewals = Mutex<
    (stopped: Bool, inFlight: Int, drained: [CheckedContinuation<Void, Never>])
  >(
    (false, 0, [])
  )

  init(_ base: any SessionStorage<String, Cart.State>) { self.base = base }

  /// Stops renewals, and returns once none is in flight: one that began before would mark the
  /// owner alive again after a test ended its lease.
  func stop() async {
    await withCheckedContinuation { continuation in
      let drained = self.renewals.withLock { renewals in
        renewals.stopped = true
        guard renewals.inFlight > 0 else { return true }
        renewals.drained.append(continuation)
        return false
      }
      if drained { continuation.resume() }
    }
  }

  func resume() { self.renewals.withLock { $0.stopped = false } }

  var leaseDuration: Duration { self.base.leaseDuration }
  var concurrentSaves: Int { self.base.concurrentSaves }
  var leasesPerRenewal: Int { self.base.leasesPerRenewal }

  func acquire(
    _ key: String,
    owner: String,
    address: String?
  ) async throws -> SessionAcquisition<Cart.State> {
    try await self.base.acquire(key, owner: owner, address: address)
  }

  func load(_ key: String) async throws -> Cart.State? { try await self.base.load(key) }

  func erase(_ key: String, token: UInt64?, owner: String) async throws -> SessionSaveResult {
    try await self.base.erase(key, token: token, owner: owner)
  }

  func save(
    _ writes: [SessionWrite<String, Cart.State>],
    owner: String
  ) async throws -> [SessionSaveResult] {
    try await self.base.save(writes, owner: owner)
  }

  func save(
    owner: String,
    taking take: @Sendable () -> [SessionWrite<String, Cart.State>]
  ) async throws -> [SessionSaveResult] {
    try await self.base.save(owner: owner, taking: take)
  }

  func renew(_ leases: [SessionLease<String>], owner: String) async throws -> [String] {
    let stopped = self.renewals.withLock { renewals in
      if !renewals.stopped { renewals.inFlight += 1 }
      return renewals.stopped
    }
    guard !stopped else { throw LoadError("renewals stopped") }
    defer {
      let drained = self.renewals.withLock { renewals in
        renewals.inFlight -= 1
        guard renewals.inFlight == 0 else { return [CheckedContinuation<Void, Never>]() }
        defer { renewals.drained = [] }
        return renewals.drained
      }
      for waiter in drained { waiter.resume() }
    }
    return try await self.base.renew(leases, owner: owner)
  }

  func release(_ leases: [SessionLease<String>], owner: String) async throws {
    try await self.base.release(leases, owner: owner)
  }
}

/// Set-up that is wrong is refused with an error naming it, before anything is read or written.
@Suite struct StorageSetUpTests {
  @Test func aPostgresStorageRefusesNoSaveInFlightBeforeItConnects() async throws {
    // NB: a client that is not running and points nowhere: the check comes first.
    let client = PostgresClient(
      configuration: postgresConfiguration(URL(string: "postgres://nobody@127.0.0.1:1/none")!)
    )
    let error = await #expect(throws: PostgresSessionStorageError.self) {
      _ = try await PostgresSessionStorage<String, Cart.State>(client: client, concurrentSaves: 0)
    }
    #expect(error?.description == "concurrentSaves must be at least 1, not 0")
    // A lease of no time would have its renewals run in a loop with no pause.
    let lease = await #expect(throws: PostgresSessionStorageError.self) {
      _ = try await PostgresSessionStorage<String, Cart.State>(client: client, leaseDuration: .zero)
    }
    #expect(lease?.description == "the lease duration must be positive, not 0.0 seconds")
    // The version column is PostgreSQL's `integer`: a larger version trapped at the first save.
    let version = await #expect(throws: PostgresSessionStorageError.self) {
      _ = try await PostgresSessionStorage<String, Cart.State>(
        client: client,
        stateVersion: Int(Int32.max) + 1
      )
    }
    #expect(
      version?.description == "the state version must be from 1 to 2147483647, not 2147483648"
    )
    // A table's name is an identifier checked before it is written into SQL, short enough that
    // its owners' table's name is whole.
    for table in ["Carts", "carts; DROP TABLE x", "", String(repeating: "c", count: 57)] {
      let refused = await #expect(throws: PostgresSessionStorageError.self) {
        _ = try await PostgresSessionStorage<String, Cart.State>(client: client, table: table)
      }
      #expect(refused?.description.hasPrefix("'\(table)' is not a valid table name") == true)
    }
  }

  @Test func anSQLiteStorageRefusesALeaseOfNoTimeBeforeItOpensTheFile() async throws {
    let path = "/nonexistent-\(UInt32.random(in: 0...UInt32.max))/carts.sqlite"
    let error = await #expect(throws: SQLiteSessionStorageError.self) {
      _ = try await SQLiteSessionStorage<String, Cart.State>(
        path: path,
        leaseDuration: .seconds(-1)
      )
    }
    #expect(error?.description == "the lease duration must be positive, not -1.0 seconds")
    #expect(!FileManager.default.fileExists(atPath: path))
  }
}

@Suite(.timeLimit(.minutes(2))) struct SQLiteStorageTests {
  @Test func theStorageContractHoldsOnSQLite() async throws {
    let directory = try temporaryDirectory()
    defer { try? FileManager.default.removeItem(at: directory) }
    let path = directory.appendingPathComponent("carts.sqlite").path
    try await checkStorageContract {
      try await SQLiteSessionStorage<String, Cart.State>(path: path, leaseDuration: .seconds(30))
    } corrupt: { key in
      try sqlite(path, "UPDATE sessions SET state = x'7b6e6f' WHERE key = '\(key)'")
    } expire: { key in
      try expireSQLiteLease(on: key, path)
    }
  }

  @Test func storedRowsWithValuesOfAnotherTypeFailOnlyTheirKeysNamingTheColumn() async throws {
    // SQLite keeps any type in any column: a row another program or version wrote is read with
    // throwing decoders, never GRDB's trapping subscript, and a token is any 64-bit pattern.
    let directory = try temporaryDirectory()
    defer { try? FileManager.default.removeItem(at: directory) }
    let path = directory.appendingPathComponent("carts.sqlite").path
    func carts() async throws -> Carts {
      let storage = try await SQLiteSessionStorage<String, Cart.State>(path: path)
      return Carts(storage: storage, owner: "node-a") {
        Cart.State(customer: $0)
      } reducer: {
        Cart()
      }
    }
    let keys = [
      "negative", "largest", "forever", "token", "owner", "expiry", "version", "state", "window",
    ]
    let first = try await carts()
    for key in keys + ["fine"] {
      try await first.send(.add(item: "apple", quantity: 1), to: key)
    }
    await first.shutdown(gracePeriod: .seconds(1))
    for (key, value) in [
      ("negative", "token = -5"), ("largest", "token = 9223372036854775807"),
      ("forever", "owner = 'elsewhere', lease_expiry = 1e999"), ("token", "token = 'abc'"),
      ("owner", "owner = x'ff', lease_expiry = 1e300"),
      ("expiry", "lease_expiry = 'soon'"), ("version", "encoding_version = 'two'"),
      ("state", "state = 7"), ("window", "idempotency_keys = 'none'"),
    ] {
      try sqlite(path, "UPDATE sessions SET \(value) WHERE key = '\(key)'")
    }
    let again = try await carts()
    // Tokens at either end are tokens like any other.
    for key in ["negative", "largest", "fine"] {
      let cart = try await again.send(.add(item: "apple", quantity: 1), to: key, reading: { $0 })
      #expect(cart.items == ["apple": 2])
    }
    // A lease that never expires is held, for as long as a `Retry-After` can say.
    let held = await #expect(throws: SessionError.self) {
      try await again.send(.add(item: "apple", quantity: 1), to: "forever")
    }
    #expect(held?.message.contains("'elsewhere'") == true)
    #expect(again.owner(of: "forever")?.leaseLeft == .seconds(365 * 86_400))
    for (key, named) in [
      ("token", "token column"), ("owner", "owner column"), ("expiry", "lease_expiry column"),
      ("version", "encoding_version column"), ("state", "state column"),
      ("window", "idempotency record"),
    ] {
      let error = await #expect(throws: SessionError.self) {
        try await again.send(.add(item: "apple", quantity: 1), to: key)
      }
      guard case .stateUnreadable(let failed, _, let message) = error else {
        Issue.record("expected .stateUnreadable for \(key), got \(String(describing: error))")
        continue
      }
      #expect(failed == key)
      #expect(message.contains(named), "\(message)")
    }
    // A read without the lease fails the same way.
    await #expect(throws: SessionStateUnreadable.self) {
      _ = try await SQLiteSessionStorage<String, Cart.State>(path: path).load("version")
    }
    await again.shutdown(gracePeriod: .seconds(1))
  }

  @Test func aTableWithAnotherSchemaIsRefusedNamingTheDifference() async throws {
    let directory = try temporaryDirectory()
    defer { try? FileManager.default.removeItem(at: directory) }
    let path = directory.appendingPathComponent("carts.sqlite").path
    try sqlite(path, "CREATE TABLE sessions (key TEXT PRIMARY KEY, payload BLOB)")
    let error = await #expect(throws: SQLiteSessionStorageError.self) {
      _ = try await SQLiteSessionStorage<String, Cart.State>(path: path)
    }
    #expect(error?.description.contains("payload BLOB") == true)
  }

  @Test func aRegistryServiceSavesEveryCartOnGracefulShutdown() async throws {
    let directory = try temporaryDirectory()
    defer { try? FileManager.default.removeItem(at: directory) }
    let path = directory.appendingPathComponent("carts.sqlite").path
    let storage = try await SQLiteSessionStorage<String, Cart.State>(path: path)
    let carts = Carts(storage: storage, owner: "a") {
      Cart.State(customer: $0)
    } reducer: {
      Cart()
    }
    try await testGracefulShutdown { trigger in
      let group = ServiceGroup(services: [carts], logger: Logger(label: "test"))
      try await withThrowingTaskGroup(of: Void.self) { tasks in
        tasks.addTask { try await group.run() }
        try await carts.send(.add(item: "apple", quantity: 1), to: "alice")
        trigger.triggerGracefulShutdown()
        try await tasks.waitForAll()
      }
    }
    #expect(carts.isShutDown)
    #expect(try await storage.storedState(for: "alice")?.items == ["apple": 1])
    #expect(try await storage.acquire("alice", owner: "b").state != nil)  // the lease was released
  }
}

/// Runs `sql` on the SQLite file with the `sqlite3`-free path: GRDB through the storage module is
/// not reachable from here, so a tiny helper process would do; instead use Foundation's `Process`
/// with Python's sqlite3 module, which every CI machine here has.
func sqlite(_ path: String, _ sql: String) throws {
  let process = Process()
  process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
  process.arguments = [
    "python3", "-c",
    "import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); c.execute(sys.argv[2]); c.commit()",
    path, sql,
  ]
  try process.run()
  process.waitUntilExit()
  guard process.terminationStatus == 0 else {
    throw LoadError("python3 sqlite3 failed (\(process.terminationStatus)) on: \(sql)")
  }
}

/// The PostgreSQL the tests use, from `POSTGRES_URL`; `nil` (the tests skip, saying so) if unset.
let postgresURL: URL? = ProcessInfo.processInfo.environment["POSTGRES_URL"].flatMap(
  URL.init(string:)
)

func postgresConfiguration(_ url: URL) -> PostgresClient.Configuration {
  PostgresClient.Configuration(
    host: url.host ?? "127.0.0.1",
    port: url.port ?? 5432,
    username: url.user ?? "postgres",
    password: nil,
    database: String(url.path.dropFirst()),
    tls: .disable
  )
}

/// Runs `body` with a running client, on a table of its own (dropped at the end).
func withPostgres(
  _ body: @Sendable (PostgresClient, String) async throws -> Void
) async throws {
  guard let url = postgresURL else { return }
  let client = PostgresClient(configuration: postgresConfiguration(url))
  let run = Task { await client.run() }
  defer { run.cancel() }
  let table = "carts_\(UInt32.random(in: 0...UInt32.max))"
  do {
    try await body(client, table)
  } catch {
    _ = try? await client.query(
      "DROP TABLE IF EXISTS \(unescaped: table), \(unescaped: table)_owners"
    )
    throw error
  }
  try await client.query("DROP TABLE IF EXISTS \(unescaped: table), \(unescaped: table)_owners")
}

/// Ends `owner`'s leases on `table` as waiting out their expiry would: the rows' expiry and the
/// owner's liveness both behind the database's clock.
func expireLeases(of owner: String, table: String, _ client: PostgresClient) async throws {
  try await client.query(
    "UPDATE \(unescaped: table) SET lease_expires_at = now() - interval '1 second' WHERE owner = \(owner)"
  )
  try await client.query(
    """
    UPDATE \(unescaped: table)_owners SET alive_until = now() - interval '1 second'
    WHERE owner = \(owner)
    """
  )
}

/// Ends the lease on `key` as waiting out its expiry would: its row's expiry and its owner's
/// liveness (so the owner's other leases end too).
func expireLease(on key: String, table: String, _ client: PostgresClient) async throws {
  try await client.query(
    """
    UPDATE \(unescaped: table)_owners SET alive_until = now() - interval '1 second'
    WHERE owner = (SELECT owner FROM \(unescaped: table) WHERE key = \(key))
    """
  )
  try await client.query(
    "UPDATE \(unescaped: table) SET lease_expires_at = now() - interval '1 second' WHERE key = \(key)"
  )
}

@Suite(
  .timeLimit(.minutes(2)),
  .enabled(
    if: postgresURL != nil,
    "POSTGRES_URL is not set: no PostgreSQL to test against (.ci/run starts one)"
  )
)
struct PostgresStorageTests {
  @Test func theStorageContractHoldsOnPostgres() async throws {
    try await withPostgres { client, table in
      try await checkStorageContract {
        try await PostgresSessionStorage<String, Cart.State>(client: client, table: table)
      } corrupt: { key in
        try await client.query(
          "UPDATE \(unescaped: table) SET state = '\\x7b6e6f' WHERE key = \(key)"
        )
      } expire: { key in
        try await expireLease(on: key, table: table, client)
      }
    }
  }

  @Test func aTableWithAnotherSchemaIsRefusedNamingTheDifference() async throws {
    try await withPostgres { client, table in
      try await client.query(
        "CREATE TABLE \(unescaped: table) (key text PRIMARY KEY, payload bytea)"
      )
      let error = await #expect(throws: PostgresSessionStorageError.self) {
        _ = try await PostgresSessionStorage<String, Cart.State>(client: client, table: table)
      }
      #expect(error?.description.contains("payload bytea") == true)
    }
  }

  @Test func anOwnersTableOfAnotherShapeIsRefusedNamingIt() async throws {
    try await withPostgres { client, table in
      // A table of the app's own that happens to have the owners' table's name.
      try await client.query(
        "CREATE TABLE \(unescaped: table)_owners (owner text PRIMARY KEY, joined date)"
      )
      let error = await #expect(throws: PostgresSessionStorageError.self) {
        _ = try await PostgresSessionStorage<String, Cart.State>(client: client, table: table)
      }
      #expect(error?.description.contains("\(table)_owners") == true)
      #expect(error?.description.contains("joined date") == true)
    }
  }

  @Test func anOwnerAliveForeverHoldsItsKeysAndSaysSoForAYearAtMost() async throws {
    // Hostile or mistaken liveness (an owner's row set to 'infinity' by hand): its keys are held,
    // and the time left that a `Retry-After` would carry stays a number.
    try await withPostgres { client, table in
      let storage = try await PostgresSessionStorage<String, Cart.State>(
        client: client,
        table: table
      )
      guard case .acquired(let token, _, _) = try await storage.acquire("alice", owner: "a") else {
        Issue.record("alice was not acquired")
        return
      }
      _ = try await storage.renew([SessionLease(key: "alice", token: token)], owner: "a")
      try await client.query(
        "UPDATE \(unescaped: table)_owners SET alive_until = 'infinity' WHERE owner = 'a'"
      )
      try await client.query(
        "UPDATE \(unescaped: table) SET lease_expires_at = 'epoch' WHERE key = 'alice'"
      )
      let held = try await storage.acquire("alice", owner: "b")
      guard case .heldBy("a", _, let left?) = held else {
        Issue.record("alice went to b while a was alive: \(held)")
        return
      }
      #expect(left > .seconds(364 * 86_400) && left <= .seconds(365 * 86_400))
      // Released, the key is free at once, whatever its owner's liveness.
      try await storage.release([SessionLease(key: "alice", token: token)], owner: "a")
      guard case .acquired = try await storage.acquire("alice", owner: "b") else {
        Issue.record("alice was not free once released")
        return
      }
    }
  }

  @Test func storedTokensAtEitherEndOfTheRangeAreServedAndAnEndlessLeaseIsHeld() async throws {
    try await withPostgres { client, table in
      let storage = try await PostgresSessionStorage<String, Cart.State>(
        client: client,
        table: table
      )
      func carts() -> Carts {
        Carts(storage: storage, owner: "a") {
          Cart.State(customer: $0)
        } reducer: {
          Cart()
        }
      }
      let first = carts()
      for key in ["negative", "largest", "forever"] {
        try await first.send(.add(item: "apple", quantity: 1), to: key)
      }
      await first.shutdown(gracePeriod: .seconds(1))
      try await client.query("UPDATE \(unescaped: table) SET token = -5 WHERE key = 'negative'")
      try await client.query(
        "UPDATE \(unescaped: table) SET token = 9223372036854775807 WHERE key = 'largest'"
      )
      try await client.query(
        """
        UPDATE \(unescaped: table) SET owner = 'elsewhere', lease_expires_at = 'infinity'
        WHERE key = 'forever'
        """
      )
      let again = carts()
      // Another program's token is a bit pattern like any other, and the largest wraps.
      for key in ["negative", "largest"] {
        let cart = try await again.send(.add(item: "apple", quantity: 1), to: key, reading: { $0 })
        #expect(cart.items == ["apple": 2])
      }
      // A lease that never expires is held by its owner.
      let held = await #expect(throws: SessionError.self) {
        try await again.send(.add(item: "apple", quantity: 1), to: "forever")
      }
      #expect(held?.message.contains("'elsewhere'") == true, "\(String(describing: held))")
      try await again.send(.add(item: "apple", quantity: 1), to: "alice")
      await again.shutdown(gracePeriod: .seconds(1))
    }
  }

  @Test func aKeyWithANULIsRefusedNamingItNotAsTheDatabasesEncodingError() async throws {
    try await withPostgres { client, table in
      let storage = try await PostgresSessionStorage<String, Cart.State>(
        client: client,
        table: table
      )
      let load = await #expect(throws: PostgresSessionStorageError.self) {
        _ = try await storage.load("a\0b")
      }
      #expect(
        load?.description
          == #"the key 'a\0b' contains a NUL character, which PostgreSQL's text cannot hold"#
      )
      let carts = Carts(storage: storage, owner: "a") {
        Cart.State(customer: $0)
      } reducer: {
        Cart()
      }
      let send = await #expect(throws: SessionError.self) {
        try await carts.send(.add(item: "apple", quantity: 1), to: "a\0b")
      }
      #expect(send?.message.contains("contains a NUL character") == true)
      // Other keys are served.
      try await carts.send(.add(item: "apple", quantity: 1), to: "alice")
      await carts.shutdown(gracePeriod: .seconds(1))
    }
  }

  @Test func manyWaitingSendsAreSavedInFewStatements() async throws {
    try await withPostgres { client, table in
      let storage = try await PostgresSessionStorage<String, Cart.State>(
        client: client,
        table: table
      )
      let carts = Carts(storage: storage, owner: "a") {
        Cart.State(customer: $0)
      } reducer: {
        Cart()
      }
      try await withThrowingTaskGroup(of: Void.self) { group in
        for index in 0..<500 {
          group.addTask {
            try await carts.send(.add(item: "apple", quantity: 1), to: "c\(index % 50)")
          }
        }
        try await group.waitForAll()
      }
      for index in 0..<50 {
        #expect(try await storage.storedState(for: "c\(index)")?.items == ["apple": 10])
      }
      await carts.shutdown(gracePeriod: .seconds(1))
    }
  }

  /// Saves, renewals and releases over overlapping keys, each in any order, run at once as an
  /// instance's group commit and lease keeper do: PostgreSQL must never find them deadlocked
  /// (it aborts one, and a customer's add answers 503).
  @Test func savesRenewalsAndReleasesOfOverlappingKeysNeverDeadlock() async throws {
    try await withPostgres { client, table in
      let storage = try await PostgresSessionStorage<String, Cart.State>(
        client: client,
        table: table
      )
      var leases: [SessionLease<String>] = []
      for index in 0..<64 {
        guard case .acquired(let token, _, _) = try await storage.acquire("k\(index)", owner: "a")
        else { Issue.record("k\(index) was not acquired"); return }
        leases.append(SessionLease(key: "k\(index)", token: token))
      }
      let all = leases
      try await withThrowingTaskGroup(of: Void.self) { group in
        // Each saver has keys of its own, as a key is in one save at a time.
        for saver in 0..<4 {
          let mine = all.filter { Int($0.key.dropFirst())! % 4 == saver }
          group.addTask {
            for round in 0..<40 {
              let writes = mine.shuffled().map { lease in
                var cart = Cart.State(customer: lease.key)
                cart.items = ["apple": round + 1]
                return SessionWrite(key: lease.key, state: cart, token: lease.token)
              }
              let results = try await storage.save(writes, owner: "a")
              #expect(results.allSatisfy { $0 == .saved }, "\(results)")
            }
          }
        }
        for _ in 0..<2 {
          group.addTask {
            for _ in 0..<40 {
              let lost = try await storage.renew(all.shuffled(), owner: "a")
              #expect(lost.isEmpty)
            }
          }
        }
        // Releases of leases no longer held (another token) lock the same rows and change none.
        group.addTask {
          for _ in 0..<40 {
            let stale = all.shuffled().map { SessionLease(key: $0.key, token: $0.token + 1) }
            try await storage.release(stale, owner: "a")
          }
        }
        try await group.waitForAll()
      }
      for index in 0..<64 {
        let stored = try await storage.storedState(for: "k\(index)")
        #expect(stored?.items == ["apple": 40])
      }
    }
  }
}

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

extension SessionAcquisition {
  /// The granted lease's token; `nil` when another owner holds the key.
  var token: UInt64? {
    guard case .acquired(let token, _, _) = self else { return nil }
    return token
  }

  /// The state stored under a granted lease; `nil` when none is stored or the lease is held.
  var state: State? {
    guard case .acquired(_, let state, _) = self else { return nil }
    return state
  }
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
  let old = try #require(
    try await storage.acquire("erin", owner: "node-c").token,
    "erin's lease was not granted"
  )
  var before = Cart.State(customer: "erin")
  before.items = ["old": 1]
  let write = SessionWrite(key: "erin", state: before, token: old)
  #expect(try await storage.save([write], owner: "node-c") == [.saved])
  #expect(try await storage.erase("erin", token: old, owner: "node-c") == .saved)
  let afresh = try await storage.acquire("erin", owner: "node-c")
  let new = try #require(afresh.token, "erin's lease was not granted afresh")
  #expect(afresh.state == nil)
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

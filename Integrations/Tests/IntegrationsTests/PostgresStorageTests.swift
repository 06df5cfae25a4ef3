import Foundation
import PostgresNIO
import Testing
import Unidirectional
import UnidirectionalPostgres

@testable import CartServer

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

/// Runs `body` as ``withPostgres(_:)`` does, with a storage of carts on its table.
func withPostgresStorage(
  _ body:
    @Sendable (PostgresClient, String, PostgresSessionStorage<String, Cart.State>)
    async throws -> Void
) async throws {
  try await withPostgres { client, table in
    try await body(
      client,
      table,
      try await PostgresSessionStorage<String, Cart.State>(client: client, table: table)
    )
  }
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
    try await withPostgresStorage { client, table, storage in
      let token = try #require(
        try await storage.acquire("alice", owner: "a").token,
        "alice was not acquired"
      )
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
      _ = try #require(
        try await storage.acquire("alice", owner: "b").token,
        "alice was not free once released"
      )
    }
  }

  @Test func aLeaseLetGoBetweenTheTakingAndTheLookAtItsHolderIsTakenOnTheNextTry() async throws {
    // The race an acquisition retries for: its insert finds alice held, and her holder lets her
    // go before the look at who holds her, so there is nobody to name. A trigger lets her go
    // once, at the end of the first insert, as a release landing between the two statements.
    try await withPostgresStorage { client, table, storage in
      let held = try #require(
        try await storage.acquire("alice", owner: "a").token,
        "alice was not acquired"
      )
      let state = Cart.State(customer: "alice", items: ["apple": 1], version: 1)
      let write = SessionWrite(key: "alice", state: state, token: held)
      #expect(try await storage.save([write], owner: "a") == [.saved])
      let letGo = "\(table)_let_go"
      try await client.query("CREATE TABLE \(unescaped: letGo) (key text)")
      try await client.query("INSERT INTO \(unescaped: letGo) VALUES ('alice')")
      try await client.query(
        """
        CREATE FUNCTION \(unescaped: letGo)() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
          UPDATE \(unescaped: table) SET owner = NULL
            WHERE key IN (SELECT key FROM \(unescaped: letGo));
          DELETE FROM \(unescaped: letGo);
          RETURN NULL;
        END $$
        """
      )
      try await client.query(
        """
        CREATE TRIGGER \(unescaped: letGo) AFTER INSERT ON \(unescaped: table)
        FOR EACH STATEMENT EXECUTE FUNCTION \(unescaped: letGo)()
        """
      )
      let taken = try await storage.acquire("alice", owner: "b")
      try await client.query("DROP TABLE \(unescaped: letGo)")
      try await client.query("DROP TRIGGER \(unescaped: letGo) ON \(unescaped: table)")
      try await client.query("DROP FUNCTION \(unescaped: letGo)()")
      let token = try #require(taken.token, "alice, let go, was answered \(taken)")
      #expect(token != held)
      #expect(taken.state == state)
      // The holder's save under the lease it let go is refused.
      #expect(try await storage.save([write], owner: "a") == [.staleToken(currentOwner: "b")])
    }
  }

  @Test func storedTokensAtEitherEndOfTheRangeAreServedAndAnEndlessLeaseIsHeld() async throws {
    try await withPostgresStorage { client, table, storage in
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
    try await withPostgresStorage { client, table, storage in
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
    try await withPostgresStorage { client, table, storage in
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
    try await withPostgresStorage { client, table, storage in
      var leases: [SessionLease<String>] = []
      for index in 0..<64 {
        let token = try #require(
          try await storage.acquire("k\(index)", owner: "a").token,
          "k\(index) was not acquired"
        )
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

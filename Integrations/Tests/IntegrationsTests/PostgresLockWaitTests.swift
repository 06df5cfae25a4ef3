import Foundation
import Logging
import PostgresNIO
import Testing
import Unidirectional
import UnidirectionalPostgres

@testable import CartServer

/// A lock someone else's transaction holds (a row an operator's query left locked, the table's
/// advisory lock) fails the statements that need it within the storage's lock wait, instead of
/// holding them, and every save queued behind them, until that transaction ends.
@Suite(.timeLimit(.minutes(1))) struct PostgresLockWaitTests {
  /// Runs `body` while another transaction on `client` holds what `lock` locks; that transaction
  /// rolls back after.
  private func whileLocked(
    _ lock: PostgresQuery,
    on client: PostgresClient,
    _ body: () async throws -> Void
  ) async throws {
    let (held, holding) = AsyncStream.makeStream(of: Void.self)
    let (done, finishing) = AsyncStream.makeStream(of: Void.self)
    let holder = Task {
      try await client.withConnection { connection in
        let logger = Logger(label: "lock-holder")
        try await connection.query("BEGIN", logger: logger)
        try await connection.query(lock, logger: logger)
        holding.yield()
        for await _ in done { break }
        try await connection.query("ROLLBACK", logger: logger)
      }
    }
    for await _ in held { break }
    do {
      try await body()
    } catch {
      finishing.yield()
      try await holder.value
      throw error
    }
    finishing.yield()
    try await holder.value
  }

  /// A storage waiting briefly for locks, on a table of its own (``withPostgres``), and its client.
  private func withStorage(
    _ body:
      @Sendable (PostgresClient, String, PostgresSessionStorage<String, Cart.State>) async throws ->
      Void
  ) async throws {
    try await withPostgres { client, table in
      let storage = try await PostgresSessionStorage<String, Cart.State>(
        client: client,
        table: table,
        lockWait: .milliseconds(300)
      )
      try await body(client, table, storage)
    }
  }

  @Test(.enabled(if: postgresURL != nil, "POSTGRES_URL is not set: no PostgreSQL to test against"))
  func aRowAnotherTransactionHoldsFailsOnlyWhatNeedsItWithinTheLockWait() async throws {
    try await withStorage { client, table, storage in
      var tokens: [String: UInt64] = [:]
      for key in ["alice", "bob"] {
        let token = try #require(
          try await storage.acquire(key, owner: "a").token,
          "\(key) was not acquired"
        )
        tokens[key] = token
      }
      let (aliceWrite, bobWrite) = (
        SessionWrite(key: "alice", state: Cart.State(customer: "alice"), token: tokens["alice"]!),
        SessionWrite(key: "bob", state: Cart.State(customer: "bob"), token: tokens["bob"]!)
      )
      let alice = SessionLease(key: "alice", token: tokens["alice"]!)
      try await whileLocked(
        "SELECT 1 FROM \(unescaped: table) WHERE key = 'alice' FOR UPDATE",
        on: client
      ) {
        let calls: [(String, @Sendable () async throws -> Void)] = [
          ("save", { _ = try await storage.save([aliceWrite, bobWrite], owner: "a") }),
          ("acquire", { _ = try await storage.acquire("alice", owner: "a") }),
          ("erase", { _ = try await storage.erase("alice", token: alice.token, owner: "a") }),
        ]
        for (name, call) in calls {
          let error = await #expect(throws: PostgresSessionStorageError.self, "\(name)") {
            try await call()
          }
          #expect(
            error?.description.contains("lock") == true,
            "\(name): \(String(describing: error))"
          )
        }
        // A renewal leaves the locked lease for its next round (not lost) and renews the rest.
        let lost = try await storage.renew(
          [alice, SessionLease(key: "bob", token: bobWrite.token)],
          owner: "a"
        )
        #expect(lost.isEmpty)
        // A release leaves the locked lease to expire.
        try await storage.release([alice], owner: "a")
        // What does not need the locked row goes on.
        let saved = try await storage.save([bobWrite], owner: "a")
        #expect(saved == [.saved])
        let loaded = try await storage.load("alice")
        #expect(loaded == nil)
      }
      #expect(try await storage.save([aliceWrite], owner: "a") == [.saved])
      try await storage.release([alice], owner: "a")
      _ = try #require(
        try await storage.acquire("alice", owner: "b").token,
        "alice's lease was not given up once its row was free"
      )
    }
  }

  @Test(.enabled(if: postgresURL != nil, "POSTGRES_URL is not set: no PostgreSQL to test against"))
  func theTablesAdvisoryLockHeldElsewhereFailsSavesWithinTheLockWait() async throws {
    try await withStorage { client, table, storage in
      let token = try #require(
        try await storage.acquire("alice", owner: "a").token,
        "alice was not acquired"
      )
      let write = SessionWrite(key: "alice", state: Cart.State(customer: "alice"), token: token)
      let rowsLock = "unidirectional.rows." + table
      try await whileLocked("SELECT pg_advisory_xact_lock(hashtext(\(rowsLock)))", on: client) {
        await #expect(throws: PostgresSessionStorageError.self) {
          _ = try await storage.save([write], owner: "a")
        }
        // A renewal does not wait for the table's lock: it renews a lease at a time.
        let lost = try await storage.renew([SessionLease(key: "alice", token: token)], owner: "a")
        #expect(lost.isEmpty)
        let stale = try await storage.renew(
          [SessionLease(key: "alice", token: token + 1)],
          owner: "a"
        )
        #expect(stale == ["alice"])
      }
      #expect(try await storage.save([write], owner: "a") == [.saved])
    }
  }
}

import Foundation
import PostgresNIO
import Testing
import Unidirectional
import UnidirectionalPostgres

@testable import CartServer

/// A database that goes silent on an open connection (a failover that moved its address, a
/// network that drops packets without a reset) fails the storage's calls within its answer wait,
/// and a statement given up on that reaches the database later changes nothing.
@Suite(
  .timeLimit(.minutes(1)),
  .enabled(if: postgresURL != nil, "POSTGRES_URL is not set: no PostgreSQL to test against")
)
struct PostgresAnswerWaitTests {
  @Test func callsOnAConnectionThatWentSilentFailWithinTheAnswerWaitAndTheStorageServesOnceHeard()
    async throws
  {
    try await withPostgres { _, table in
      let url = try #require(postgresURL)
      let proxy = try await SilenceableProxy(to: url.port ?? 5432)
      let client = PostgresClient(
        configuration: .init(
          host: "127.0.0.1",
          port: proxy.port,
          username: url.user ?? "postgres",
          password: nil,
          database: String(url.path.dropFirst()),
          tls: .disable
        )
      )
      let run = Task { await client.run() }
      defer { run.cancel() }
      // NB: the pool's first connection is made before the storage's short waits apply: on a
      // machine busy with the other suites, making it took longer than the connection wait.
      try await client.query("SELECT 1")
      let storage = try await PostgresSessionStorage<String, Cart.State>(
        client: client,
        table: table,
        connectionWait: .milliseconds(500),
        lockWait: .milliseconds(100),
        answerWait: .milliseconds(100)
      )
      #expect(storage.answerWait == .milliseconds(1_100))
      let token = try #require(
        try await storage.acquire("alice", owner: "a").token,
        "alice was not acquired"
      )
      proxy.silence()
      let write = SessionWrite(key: "alice", state: Cart.State(customer: "alice"), token: token)
      let lease = SessionLease(key: "alice", token: token)
      // The save goes on the pool's open connection, which goes silent under it.
      let error = await #expect(throws: PostgresSessionStorageError.self) {
        _ = try await storage.save([write], owner: "a")
      }
      #expect(error?.description.contains("did not answer within 1.1 seconds") == true)
      // That connection is closed; a new one cannot be made through the silence either.
      let calls: [(String, @Sendable () async throws -> Void)] = [
        ("load", { _ = try await storage.load("alice") }),
        ("renew", { _ = try await storage.renew([lease], owner: "a") }),
      ]
      for (name, call) in calls {
        let error = await #expect(throws: PostgresSessionStorageError.self, "\(name)") {
          try await call()
        }
        let named = [
          "did not answer within 1.1 seconds",
          "no connection to the database was ready within 0.5 seconds",
        ]
        #expect(
          named.contains { error?.description.contains($0) == true },
          "\(name): \(String(describing: error))"
        )
      }
      proxy.hear()
      // NB: the pool makes its next connection after a backoff that grew with each attempt the
      // silence failed, which may be longer than one connection wait on a busy machine.
      var saved: [SessionSaveResult] = []
      for _ in 0..<20 where saved.isEmpty {
        saved = (try? await storage.save([write], owner: "a")) ?? []
      }
      #expect(saved == [.saved])
      await proxy.close()
    }
  }

  @Test func anOwnerTakingItsOwnUnexpiredLeaseAgainGetsANewTokenSoItsEarlierSavesAreRefused()
    async throws
  {
    try await withPostgresStorage { client, table, storage in
      let first = try #require(try await storage.acquire("alice", owner: "a").token)
      let second = try #require(try await storage.acquire("alice", owner: "a").token)
      #expect(second > first)
      let fresh = Cart.State(customer: "alice", items: ["fresh": 1], version: 1)
      let stale = Cart.State(customer: "alice", items: ["stale": 1], version: 1)
      #expect(
        try await storage.save(
          [SessionWrite(key: "alice", state: fresh, token: second)],
          owner: "a"
        )
          == [.saved]
      )
      // A save of the first activation, given up on, reaching the database only now.
      let late = try await storage.save(
        [SessionWrite(key: "alice", state: stale, token: first)],
        owner: "a"
      )
      #expect(late != [.saved])
      #expect(try await storage.load("alice") == fresh)
    }
  }
}

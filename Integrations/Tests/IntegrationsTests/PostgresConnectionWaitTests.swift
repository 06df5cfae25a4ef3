import Foundation
import PostgresNIO
import Testing
import Unidirectional
import UnidirectionalPostgres

@testable import CartServer

/// While no connection can be had (the database down, the pool used up), a Postgres storage fails
/// within its wait, naming the cause, instead of waiting for the database to come back.
@Suite(.timeLimit(.minutes(1))) struct PostgresConnectionWaitTests {
  @Test func aDatabaseNobodyAnswersAtFailsTheStorageWithinItsWait() async throws {
    // NB: port 1 on loopback: nothing listens, every connection attempt is refused at once, and
    // the pool keeps trying.
    var configuration = PostgresClient.Configuration(
      host: "127.0.0.1",
      port: 1,
      username: "nobody",
      password: nil,
      database: "none",
      tls: .disable
    )
    configuration.options.connectTimeout = .seconds(1)
    let client = PostgresClient(configuration: configuration)
    let run = Task { await client.run() }
    defer { run.cancel() }
    let error = await #expect(throws: PostgresSessionStorageError.self) {
      _ = try await PostgresSessionStorage<String, Cart.State>(
        client: client,
        connectionWait: .milliseconds(300)
      )
    }
    #expect(
      error?.description.hasPrefix(
        "the PostgreSQL database failed: no connection to the database was ready within 0.3 seconds"
      ) == true
    )
    // The error says where to look: the database may be down, busy, or refusing connections.
    #expect(error?.description.contains("max_connections") == true)
  }

  @Test(.enabled(if: postgresURL != nil, "POSTGRES_URL is not set: no PostgreSQL to test against"))
  func whileThePoolIsUsedUpEveryCallFailsWithinItsWaitAndServesOnceAConnectionIsFree()
    async throws
  {
    var configuration = postgresConfiguration(postgresURL!)
    configuration.options.maximumConnections = 1
    let client = PostgresClient(configuration: configuration)
    let run = Task { await client.run() }
    defer { run.cancel() }
    let table = "carts_wait_\(UInt32.random(in: 0...UInt32.max))"
    // NB: set up with the default wait (connecting can take a while on a busy machine); the
    // calls under test go through a second storage on the same table, which waits briefly.
    let patient = try await PostgresSessionStorage<String, Cart.State>(client: client, table: table)
    let token = try #require(
      try await patient.acquire("alice", owner: "a").token,
      "alice was not acquired"
    )
    let storage = try await PostgresSessionStorage<String, Cart.State>(
      client: client,
      table: table,
      connectionWait: .milliseconds(500)
    )
    // Another user of the client holds its one connection until told to let go.
    let (held, holding) = AsyncStream.makeStream(of: Void.self)
    let (letGo, lettingGo) = AsyncStream.makeStream(of: Void.self)
    let holder = Task {
      try await client.withConnection { _ in
        holding.yield()
        for await _ in letGo { break }
      }
    }
    for await _ in held { break }
    let lease = SessionLease(key: "alice", token: token)
    let write = SessionWrite(key: "alice", state: Cart.State(customer: "alice"), token: token)
    let calls: [(String, @Sendable () async throws -> Void)] = [
      ("load", { _ = try await storage.load("alice") }),
      ("acquire", { _ = try await storage.acquire("bob", owner: "a") }),
      ("save", { _ = try await storage.save([write], owner: "a") }),
      ("renew", { _ = try await storage.renew([lease], owner: "a") }),
      ("erase", { _ = try await storage.erase("carol", token: nil, owner: "a") }),
    ]
    for (name, call) in calls {
      let error = await #expect(throws: PostgresSessionStorageError.self, "\(name)") {
        try await call()
      }
      #expect(
        error?.description.contains("no connection") == true,
        "\(name): \(String(describing: error))"
      )
    }
    lettingGo.yield()
    try await holder.value
    #expect(try await patient.save([write], owner: "a") == [.saved])
    try await client.query("DROP TABLE IF EXISTS \(unescaped: table), \(unescaped: table)_owners")
  }
}

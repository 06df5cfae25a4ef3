import AsyncHTTPClient
import Foundation
import Logging
import NIOCore
import NIOHTTP1
import PostgresNIO
import RegexBuilder
import Testing

@testable import CartServer

/// Instances side by side on one PostgreSQL, behind clients that pick an instance at random for
/// every request.
@Suite(
  .serialized,
  .timeLimit(.minutes(5)),
  .enabled(if: cartServerBinary != nil, "the cart-server binary is not built next to the tests"),
  .enabled(if: postgresURL != nil, "POSTGRES_URL is not set: no PostgreSQL to test against")
)
struct ManyInstancesProcessTests {
  @Test func threeInstancesServeEveryKeyFailOverAndAFourthJoins() async throws {
    let table = "carts_many_\(UInt32.random(in: 0...UInt32.max))"
    func start(_ owner: String) async throws -> CartServerProcess {
      try await CartServerProcess([
        "--storage", postgresURL!.absoluteString, "--owner", owner, "--table", table,
        "--lease-seconds", "5",
      ])
    }
    // Started together on a new table: all of them start.
    async let startingA = start("a")
    async let startingB = start("b")
    async let startingC = start("c")
    let (a, b, c) = try await (startingA, startingB, startingC)

    // Generation 0: all three up. No request is refused.
    let driver = RetryingDriver(urls: [a.url, b.url, c.url])
    let load = Task { await driver.run(clients: 16, customers: 60) }
    await driver.waitUntilAnswered(600)

    // Generation 1: C is killed. Requests for its keys are refused (503, `Retry-After`) until
    // its leases expire; the clients that met one wait for the service to be back.
    driver.serviceChanged(to: [a.url, b.url])
    await c.stop(SIGKILL)
    await driver.waitUntilRefused()
    // The leases expire (on the database's clock, moved by SQL rather than by waiting).
    try await withPostgres { client, _ in
      try await expireLeases(of: "c", table: table, client)
    }
    // Generation 2: the survivors take C's keys over; nothing is refused from now on.
    driver.serviceChanged(to: [a.url, b.url])
    await driver.waitUntilAnswered(driver.answeredCount + 300)

    // Generation 3: a fourth instance joins and serves at once.
    let d = try await start("d")
    driver.serviceChanged(to: [a.url, b.url, d.url], isFinal: true)
    await driver.waitUntilAnswered(driver.answeredCount + 300)
    driver.stop()
    await load.value

    // A refusal belongs to the failover window when its request overlapped it: began before the
    // leases were expired (generation 2) and ended after the kill (generation 1). No other.
    let outside = driver.refusalLog.filter { $0.ended < 1 || $0.began >= 2 }
    #expect(outside.isEmpty, "refused outside the failover window: \(outside.prefix(5))")
    #expect(driver.refusalLog.contains { $0.began <= 1 && $0.ended >= 1 })
    // Every acknowledged add is in its cart exactly once, read through every instance.
    for instance in [a, b, d] {
      try await expectExactlyTheAnsweredAdds(driver, url: instance.url)
    }
    for instance in [a, b, d] { #expect(await instance.stop(SIGTERM) == 0) }
    try await withPostgres { client, _ in
      try await client.query("DROP TABLE IF EXISTS \(unescaped: table), \(unescaped: table)_owners")
    }
    await driver.shutdown()
  }
}

@Suite(
  .timeLimit(.minutes(2)),
  .enabled(if: cartServerBinary != nil, "the cart-server binary is not built next to the tests")
)
struct MetricsProcessTests {
  @Test func aScrapeAfterALoadAndErasuresCountsWhatTheClientsDid() async throws {
    let directory = try temporaryDirectory()
    defer { try? FileManager.default.removeItem(at: directory) }
    let server = try await CartServerProcess([
      "--storage", "sqlite:\(directory.appendingPathComponent("c.sqlite").path)",
    ])
    let client = HTTPClient(eventLoopGroupProvider: .singleton)
    func call(
      _ method: HTTPMethod,
      _ path: String,
      _ body: String? = nil,
      expecting status: UInt = 200
    ) async throws -> String {
      var request = HTTPClientRequest(url: server.url + path)
      request.method = method
      if let body { request.body = .bytes(ByteBuffer(string: body)) }
      let response = try await client.execute(request, timeout: .seconds(10))
      #expect(response.status.code == status, "\(method) \(path): \(response.status)")
      return String(buffer: try await response.body.collect(upTo: 1 << 22))
    }
    // A bounded load, counted as it goes: 40 adds to 10 customers, concurrently.
    let customers = (0..<10).map { "m\($0)" }
    try await withThrowingTaskGroup(of: Void.self) { group in
      for index in 0..<40 {
        group.addTask {
          _ = try await call(
            .POST,
            "/carts/\(customers[index % 10])/items",
            #"{"item": "a", "quantity": 1}"#
          )
        }
      }
      try await group.waitForAll()
    }
    for customer in customers.prefix(3) {
      _ = try await call(.DELETE, "/carts/\(customer)", expecting: 204)
    }
    _ = try await call(.POST, "/carts/m0/items", "not json", expecting: 400)
    _ = try await call(
      .GET,
      "/carts/m0/nowhere/\(String(repeating: "x", count: 50))",
      expecting: 404
    )
    let scrape = try await call(.GET, "/metrics")
    #expect(sample("unidirectional_actions_total", in: scrape) == 40)
    #expect(sample("unidirectional_session_activations_total", in: scrape) == 10)
    #expect(sample(#"unidirectional_session_passivations_total{reason="erased"}"#, in: scrape) == 3)
    #expect(sample("unidirectional_sessions_live", in: scrape) == 7)
    #expect(sample("unidirectional_storage_failures_total", in: scrape) == 0)
    // Each request under its route's pattern and the status it got; an unknown path under one
    // name, never its own.
    #expect(requestCount("/carts/{customer}/items", "POST", 200, in: scrape) == 40)
    #expect(requestCount("/carts/{customer}/items", "POST", 400, in: scrape) == 1)
    #expect(requestCount("/carts/{customer}", "DELETE", 204, in: scrape) == 3)
    #expect(requestCount("NotFound", "GET", 404, in: scrape) == 1)
    #expect(!scrape.contains("xxxxx"))
    // Every sample's name and label names are Prometheus's, or a scraper refuses the whole scrape.
    let name = /[a-zA-Z_:][a-zA-Z0-9_:]*/
    let label = /[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\]|\\.)*"/
    for line in scrape.split(separator: "\n") where !line.hasPrefix("#") {
      let matches = line.wholeMatch(
        of: Regex {
          name
          Optionally {
            "{"
            label
            ZeroOrMore {
              ","
              label
            }
            "}"
          }
          " "
          OneOrMore(.anyNonNewline)
        }
      )
      #expect(matches != nil, "not a Prometheus sample: \(line)")
    }
    #expect(await server.stop(SIGTERM) == 0)
    try await client.shutdown()
  }
}

/// How many connections an instance opens: every instance's pool counts against one server's
/// `max_connections`.
@Suite(
  .timeLimit(.minutes(2)),
  .enabled(if: cartServerBinary != nil, "the cart-server binary is not built next to the tests"),
  .enabled(if: postgresURL != nil, "POSTGRES_URL is not set: no PostgreSQL to test against")
)
struct DatabaseConnectionsProcessTests {
  @Test func aBurstOfNewCartsIsServedWithNoMoreConnectionsThanTheFlagAllows() async throws {
    // NB: a role of its own, to count this instance's connections apart from every other test's.
    try await withPostgresRole { client, table, role, address in
      var address = address
      // A password in the address is taken (the server trusts loopback, so any will do).
      address.password = "not-printed"
      let server = try await CartServerProcess([
        "--storage", address.string!, "--table", table, "--database-connections", "3",
      ])
      let http = HTTPClient(eventLoopGroupProvider: .singleton)
      // 120 carts seen for the first time at once: an activation (a statement) and a save each.
      let statuses = try await withThrowingTaskGroup(of: UInt.self) { group in
        for index in 0..<120 {
          group.addTask {
            var request = HTTPClientRequest(url: server.url + "/carts/burst\(index)/items")
            request.method = .POST
            request.body = .bytes(ByteBuffer(string: #"{"item": "a", "quantity": 1}"#))
            return try await http.execute(request, timeout: .seconds(30)).status.code
          }
        }
        return try await group.reduce(into: []) { $0.append($1) }
      }
      #expect(statuses.allSatisfy { $0 == 200 }, "\(statuses.filter { $0 != 200 })")
      let rows = try await client.query(
        "SELECT count(*)::int FROM pg_stat_activity WHERE usename = \(role)"
      )
      let open = try await rows.collect().first?.decode(Int.self) ?? -1
      #expect((1...3).contains(open), "\(open) connections open")
      #expect(server.listeningLine.contains("(storage: postgres://\(role)@"))
      // A pool the server cannot hold is warned of at start, naming the flag.
      let directory = try temporaryDirectory()
      defer { try? FileManager.default.removeItem(at: directory) }
      let log = directory.appendingPathComponent("stderr")
      #expect(FileManager.default.createFile(atPath: log.path, contents: nil))
      let greedy = try await CartServerProcess(
        ["--storage", address.string!, "--table", table, "--database-connections", "5000"],
        errors: try FileHandle(forWritingTo: log)
      )
      #expect(await greedy.stop(SIGTERM) == 0)
      let warned = try String(contentsOf: log, encoding: .utf8)
      #expect(warned.contains("this instance's pool of 5000 may be refused some"), "\(warned)")
      #expect(warned.contains("Lower --database-connections on every instance"))
      #expect(!server.listeningLine.contains("not-printed"))
      #expect(await server.stop(SIGTERM) == 0)
      try await http.shutdown()
    }
  }
}

/// Runs `body` with a client, a table name, and a login role of its own with the address that
/// connects as it; drops the table and the role afterwards, whether `body` threw or not (its
/// error, not the clean-up's, is the one thrown).
func withPostgresRole(
  _ body: @Sendable (PostgresClient, String, String, URLComponents) async throws -> Void
) async throws {
  let role = "carts_role_\(UInt32.random(in: 0...UInt32.max))"
  try await withPostgres { client, table in
    try await client.query("CREATE ROLE \(unescaped: role) LOGIN")
    try await changeSchemaGrants(client, "GRANT CREATE ON SCHEMA public TO \(unescaped: role)")
    guard let url = postgresURL,
      var address = URLComponents(url: url, resolvingAgainstBaseURL: false)
    else { throw LoadError("POSTGRES_URL is not an address") }
    address.user = role
    let outcome: Result<Void, any Error>
    do { outcome = .success(try await body(client, table, role, address)) } catch {
      outcome = .failure(error)
    }
    do {
      try await client.query(
        "DROP TABLE IF EXISTS \(unescaped: table), \(unescaped: table)_owners"
      )
      try await changeSchemaGrants(client, "REVOKE CREATE ON SCHEMA public FROM \(unescaped: role)")
      try await client.query("DROP ROLE \(unescaped: role)")
    } catch {
      try outcome.get()
      throw error
    }
    try outcome.get()
  }
}

/// Grants or revokes on the schema one at a time across every test: PostgreSQL fails two that
/// change one schema's privileges at once ("tuple concurrently updated").
private func changeSchemaGrants(_ client: PostgresClient, _ statement: PostgresQuery) async throws {
  try await client.withConnection { connection in
    try await connection.withTransaction(logger: Logger(label: "tests")) { connection in
      try await connection.query(
        "SELECT pg_advisory_xact_lock(hashtext('unidirectional.tests.grants'))",
        logger: Logger(label: "tests")
      )
      try await connection.query(statement, logger: Logger(label: "tests"))
    }
  }
}

/// The certificate a test PostgreSQL with TLS presents (`.ci/postgres` makes one when it can).
let postgresTLSRoot = ProcessInfo.processInfo.environment["POSTGRES_TLS_ROOT"]

/// `--storage postgres://…?sslmode=…`: what each mode does against a server with TLS.
@Suite(
  .timeLimit(.minutes(2)),
  .enabled(if: cartServerBinary != nil, "the cart-server binary is not built next to the tests"),
  .enabled(if: postgresURL != nil, "POSTGRES_URL is not set: no PostgreSQL to test against"),
  .enabled(if: postgresTLSRoot != nil, "POSTGRES_TLS_ROOT is not set: the PostgreSQL has no TLS")
)
struct PostgresTLSProcessTests {
  @Test func eachSSLModeConnectsAsLibpqsDoesAndAnUntrustedCertificateIsRefusedSayingSo()
    async throws
  {
    try await withPostgresRole { client, table, role, address in
      let root = postgresTLSRoot!
      // The mode, and whether the instance's connections are encrypted.
      let modes: [(String, Bool)] = [
        ("", true), ("?sslmode=disable", false), ("?sslmode=require", true),
        ("?sslmode=verify-full&sslrootcert=\(root)", true),
      ]
      for (query, encrypted) in modes {
        let server = try await CartServerProcess([
          "--storage", address.string! + query, "--table", table, "--database-connections", "2",
        ])
        let http = HTTPClient(eventLoopGroupProvider: .singleton)
        var request = HTTPClientRequest(url: server.url + "/carts/tls/items")
        request.method = .POST
        request.body = .bytes(ByteBuffer(string: #"{"item": "a", "quantity": 1}"#))
        let status = try await http.execute(request, timeout: .seconds(30)).status.code
        #expect(status == 200, "\(query)")
        let rows = try await client.query(
          """
          SELECT bool_and(s.ssl) FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid)
          WHERE a.usename = \(role)
          """
        )
        let ssl = try await rows.collect().first?.decode(Bool?.self) ?? nil
        #expect(ssl == encrypted, "\(query)")
        #expect(await server.stop(SIGTERM) == 0)
        try await http.shutdown()
      }
      // The server's certificate is trusted by no system root: verify-full without the file
      // given refuses to start, naming the failure.
      let (status, message) = try await runCartServer([
        "--port", "0", "--storage", address.string! + "?sslmode=verify-full", "--table", table,
      ])
      #expect(status == 2)
      #expect(message.hasPrefix("cart-server: cannot use PostgreSQL at postgres://\(role)@"))
      #expect(message.lowercased().contains("certificate"), "\(message)")
    }
  }
}

import AsyncHTTPClient
import Foundation
import NIOCore
import PostgresNIO
import Synchronization
import Testing

@testable import CartServer

/// The `cart-server` binary built next to this test bundle.
let cartServerBinary: URL? = {
  let url = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
    .appendingPathComponent("cart-server")
  return FileManager.default.isExecutableFile(atPath: url.path) ? url : nil
}()

/// A `cart-server` process on a loopback port it picked itself.
final class CartServerProcess: Sendable {
  let process: Process
  let port: Int
  /// The line it printed once it listened.
  let listeningLine: String
  var url: String { "http://127.0.0.1:\(self.port)" }

  /// Starts `cart-server` with `arguments`; what it writes to stderr goes to `errors` (if given).
  init(_ arguments: [String], errors: FileHandle? = nil) async throws {
    guard let binary = cartServerBinary else { throw LoadError("cart-server is not built") }
    let process = Process()
    process.executableURL = binary
    process.arguments = ["--host", "127.0.0.1", "--port", "0"] + arguments
    let output = Pipe()
    process.standardOutput = output
    process.standardError = errors ?? FileHandle.nullDevice
    try process.run()
    self.process = process
    // The first line says where it listens (or the pipe closes: the server failed to start).
    let line = await offThePool { () -> String in
      var data = Data()
      while !data.contains(UInt8(ascii: "\n")) {
        let chunk = output.fileHandleForReading.availableData
        if chunk.isEmpty { break }
        data.append(chunk)
      }
      return String(decoding: data, as: UTF8.self)
    }
    guard
      let range = line.range(of: #"listening on 127\.0\.0\.1:(\d+)"#, options: .regularExpression),
      let port = Int(line[range].split(separator: ":").last ?? "")
    else {
      process.terminate()
      throw LoadError("cart-server did not start: '\(line)'")
    }
    self.port = port
    self.listeningLine = line
  }

  /// A test that failed half-way leaves no server behind.
  deinit {
    if self.process.isRunning { kill(self.process.processIdentifier, SIGKILL) }
  }

  /// Sends `signal` and waits for the process to exit; returns its status.
  @discardableResult
  func stop(_ signal: Int32) async -> Int32 {
    kill(self.process.processIdentifier, signal)
    let process = self.process
    return await offThePool {
      process.waitUntilExit()
      return process.terminationStatus
    }
  }
}

/// Runs `body`, which blocks on a child process (its pipe, its exit), on a thread of its own: a
/// detached task would block one of the cooperative pool's threads (two on a 2-core machine) for
/// as long, and every other test with it once both are taken.
func offThePool<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
  await withCheckedContinuation { continuation in
    Thread { continuation.resume(returning: body()) }.start()
  }
}

/// Clients adding one item at a time to random carts until told to stop; counts acknowledged adds.
final class Driver: Sendable {
  let client: HTTPClient
  private let acknowledged = Mutex<[String: [String: Int]]>([:])
  private let count = Atomic(0)

  init() {
    var configuration = HTTPClient.Configuration()
    configuration.connectionPool.concurrentHTTP1ConnectionsPerHostSoftLimit = 16
    configuration.timeout.connect = .seconds(2)
    self.client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
  }

  var acknowledgedCount: Int { self.count.load(ordering: .relaxed) }
  var acknowledgedAdds: [String: [String: Int]] { self.acknowledged.withLock { $0 } }

  /// Drives `clients` clients against `url` until one sees a failure (the server went away) or
  /// `limit` adds were acknowledged in all.
  func drive(_ url: String, clients: Int, customers: Int, until limit: Int) async {
    await withTaskGroup(of: Void.self) { group in
      for _ in 0..<clients {
        group.addTask {
          while self.acknowledgedCount < limit {
            let customer = "c\(Int.random(in: 0..<customers))"
            let item = ["apple", "pear", "fig"][Int.random(in: 0..<3)]
            var request = HTTPClientRequest(url: "\(url)/carts/\(customer)/items")
            request.method = .POST
            request.body = .bytes(ByteBuffer(string: #"{"item": "\#(item)", "quantity": 1}"#))
            guard let response = try? await self.client.execute(request, timeout: .seconds(10)),
              (try? await response.body.collect(upTo: 1 << 20)) != nil, response.status == .ok
            else { return }
            self.acknowledged.withLock { $0[customer, default: [:]][item, default: 0] += 1 }
            self.count.add(1, ordering: .relaxed)
          }
        }
      }
    }
  }

  func shutdown() async { try? await self.client.shutdown() }
}

/// Runs the crash test: `rounds` times, load, SIGKILL at a random count of acknowledged adds,
/// restart on the same storage; then every acknowledged add must be in the carts.
func crashAndRestart(rounds: Int, arguments: [String]) async throws {
  let driver = Driver()
  do {
    try await crashAndRestart(rounds: rounds, arguments: arguments, driver: driver)
  } catch {
    await driver.shutdown()
    throw error
  }
  await driver.shutdown()
}

private func crashAndRestart(rounds: Int, arguments: [String], driver: Driver) async throws {
  var server = try await CartServerProcess(arguments)
  for _ in 0..<rounds {
    let target = driver.acknowledgedCount + Int.random(in: 50...400)
    let url = server.url
    let load = Task { await driver.drive(url, clients: 16, customers: 200, until: .max) }
    while driver.acknowledgedCount < target {
      await driver.drive(server.url, clients: 1, customers: 200, until: target)
    }
    await server.stop(SIGKILL)
    await load.value
    server = try await CartServerProcess(arguments)
  }
  let lost = try await countLost(driver.acknowledgedAdds, url: server.url, client: driver.client)
  #expect(driver.acknowledgedCount > rounds * 50)
  #expect(lost == 0, "\(lost) acknowledged adds were lost")
  #expect(await server.stop(SIGTERM) == 0)
}

@Suite(
  .serialized,
  .timeLimit(.minutes(5)),
  .enabled(if: cartServerBinary != nil, "the cart-server binary is not built next to the tests")
)
struct ProcessTests {
  static var crashRounds: Int {
    Int(ProcessInfo.processInfo.environment["CRASH_ROUNDS"] ?? "") ?? 20
  }

  @Test func sigtermUnderLoadFinishesWhatWasAcceptedSavesAndExitsZero() async throws {
    let directory = try temporaryDirectory()
    defer { try? FileManager.default.removeItem(at: directory) }
    let arguments = ["--storage", "sqlite:\(directory.appendingPathComponent("c.sqlite").path)"]
    let driver = Driver()
    let server = try await CartServerProcess(arguments)
    let load = Task { await driver.drive(server.url, clients: 16, customers: 100, until: .max) }
    await driver.drive(server.url, clients: 1, customers: 100, until: Int.random(in: 200...600))
    #expect(await server.stop(SIGTERM) == 0)
    await load.value
    let restarted = try await CartServerProcess(arguments)
    let lost = try await countLost(
      driver.acknowledgedAdds,
      url: restarted.url,
      client: driver.client
    )
    #expect(lost == 0)
    #expect(await restarted.stop(SIGTERM) == 0)
    await driver.shutdown()
  }

  @Test func sigkillUnderLoadLosesNothingAcknowledgedOnSQLite() async throws {
    let directory = try temporaryDirectory()
    defer { try? FileManager.default.removeItem(at: directory) }
    try await crashAndRestart(
      rounds: Self.crashRounds,
      // NB: restarted on another free port, a server is the same owner only by name.
      arguments: [
        "--storage", "sqlite:\(directory.appendingPathComponent("c.sqlite").path)", "--owner", "a",
      ]
    )
  }

  @Test(.enabled(if: postgresURL != nil, "POSTGRES_URL is not set: no PostgreSQL to test against"))
  func sigkillUnderLoadLosesNothingAcknowledgedOnPostgres() async throws {
    let table = "carts_crash_\(UInt32.random(in: 0...UInt32.max))"
    try await crashAndRestart(
      rounds: Self.crashRounds,
      arguments: ["--storage", postgresURL!.absoluteString, "--owner", "node-a", "--table", table]
    )
    try await withPostgres { client, _ in
      try await client.query("DROP TABLE IF EXISTS \(unescaped: table), \(unescaped: table)_owners")
    }
  }

  @Test(.enabled(if: postgresURL != nil, "POSTGRES_URL is not set: no PostgreSQL to test against"))
  func afterAnInstanceDiesAnotherServesItsCartsOnceItsLeasesExpire() async throws {
    let table = "carts_failover_\(UInt32.random(in: 0...UInt32.max))"
    let url = postgresURL!.absoluteString
    let a = try await CartServerProcess(["--storage", url, "--owner", "a", "--table", table])
    let b = try await CartServerProcess(["--storage", url, "--owner", "b", "--table", table])
    let driver = Driver()
    await driver.drive(a.url, clients: 8, customers: 50, until: 300)
    await a.stop(SIGKILL)
    let customers = Array(driver.acknowledgedAdds.keys)
    // Until A's leases expire, B cannot forward A's carts to it: 503 with `Retry-After` (the
    // seconds A's lease has left) and a JSON error; the owner goes to B's log, not to the client.
    var refused = HTTPClientRequest(url: "\(b.url)/carts/\(customers[0])")
    refused.method = .GET
    let response = try await driver.client.execute(refused, timeout: .seconds(10))
    #expect(response.status == .serviceUnavailable)
    #expect(
      Int(response.headers.first(name: "Retry-After") ?? "").map { (1...10).contains($0) } == true
    )
    let body = try await response.body.collect(upTo: 1 << 16)
    let error = try JSONDecoder().decode([String: String].self, from: Data(buffer: body))
    #expect(error["error"]?.contains("does not answer") == true)
    // The leases expire (on the database's clock, moved here by SQL rather than by waiting).
    let tokensOfA = Mutex<[String: Int64]>([:])
    try await withPostgres { client, _ in
      let rows = try await client.query(
        "SELECT key, token FROM \(unescaped: table) WHERE owner = 'a'"
      )
      for try await (key, token) in rows.decode((String, Int64).self) {
        tokensOfA.withLock { $0[key] = token }
      }
      try await expireLeases(of: "a", table: table, client)
    }
    let lost = try await countLost(driver.acknowledgedAdds, url: b.url, client: driver.client)
    #expect(lost == 0)
    // B took each key with a newer fencing token: never two owners under one token.
    try await withPostgres { client, _ in
      let rows = try await client.query("SELECT key, owner, token FROM \(unescaped: table)")
      for try await (key, owner, token) in rows.decode((String, String?, Int64).self) {
        guard let old = tokensOfA.withLock({ $0[key] }) else { continue }
        #expect(owner == "b")
        #expect(token > old)
      }
      try await client.query("DROP TABLE IF EXISTS \(unescaped: table), \(unescaped: table)_owners")
    }
    #expect(await b.stop(SIGTERM) == 0)
    await driver.shutdown()
  }
}

import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import PostgresNIO
import Synchronization
import Testing
import Unidirectional
import UnidirectionalSQLite

@testable import CartServer

/// Clients that retry every unanswered add with the same `Idempotency-Key` until it is answered.
///
/// As a client that got no answer must. A client whose request failed waits for the harness to
/// say the service is back (a restart, a failover), never on a timer.
final class RetryingDriver: Sendable {
  let client: HTTPClient
  private struct Service {
    /// The instances; each request goes to one of them at random.
    var urls: [String]
    var generation = 0
    /// Requests not answered 200 (then retried), by the generation they failed in.
    var refusals: [Int: Int] = [:]
    /// Each refusal: the generations it began and ended in, and what it was (its status and body,
    /// or that no answer came).
    var refusalLog: [(began: Int, ended: Int, what: String)] = []
    var isFinal = false
    var waiters: [CheckedContinuation<Void, Never>] = []
    var countWaiters: [(Int, CheckedContinuation<Void, Never>)] = []
    var refusalWaiters: [CheckedContinuation<Void, Never>] = []
    var answered: [String: [String: Int]] = [:]
    var answeredCount = 0
    var retries = 0
    var unexpected: [String] = []
  }
  private let service: Mutex<Service>
  private let stopping = Atomic(false)

  convenience init(url: String) { self.init(urls: [url]) }

  init(urls: [String]) {
    var configuration = HTTPClient.Configuration()
    configuration.connectionPool.concurrentHTTP1ConnectionsPerHostSoftLimit = 16
    configuration.timeout.connect = .seconds(2)
    self.client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
    self.service = Mutex(Service(urls: urls))
  }

  var answered: [String: [String: Int]] { self.service.withLock { $0.answered } }
  var answeredCount: Int { self.service.withLock { $0.answeredCount } }
  var retries: Int { self.service.withLock { $0.retries } }
  var unexpected: [String] { self.service.withLock { $0.unexpected } }
  var refusals: [Int: Int] { self.service.withLock { $0.refusals } }
  var refusalLog: [(began: Int, ended: Int, what: String)] {
    self.service.withLock { $0.refusalLog }
  }

  /// The service answers at `url` again; `isFinal`: no more interruptions come.
  func serviceIsBack(at url: String, isFinal: Bool = false) {
    self.serviceChanged(to: [url], isFinal: isFinal)
  }

  /// The service is now `urls` (a new generation); `isFinal`: no more interruptions come.
  func serviceChanged(to urls: [String], isFinal: Bool = false) {
    let waiters = self.service.withLock { service in
      service.urls = urls
      service.generation += 1
      service.isFinal = isFinal
      defer { service.waiters = [] }
      return service.waiters
    }
    for waiter in waiters { waiter.resume() }
  }

  /// Suspends until `count` adds were answered in all.
  func waitUntilAnswered(_ count: Int) async {
    await withCheckedContinuation { continuation in
      let done = self.service.withLock { service -> Bool in
        if service.answeredCount >= count { return true }
        service.countWaiters.append((count, continuation))
        return false
      }
      if done { continuation.resume() }
    }
  }

  /// Suspends until a request is refused in the current generation.
  func waitUntilRefused() async {
    await withCheckedContinuation { continuation in
      let refused = self.service.withLock { service -> Bool in
        if service.refusals[service.generation, default: 0] > 0 { return true }
        service.refusalWaiters.append(continuation)
        return false
      }
      if refused { continuation.resume() }
    }
  }

  /// Runs `clients` clients until ``stop()``; each finishes the add it has begun.
  func run(clients: Int, customers: Int) async {
    await withTaskGroup(of: Void.self) { group in
      for _ in 0..<clients {
        group.addTask {
          while !self.stopping.load(ordering: .relaxed) {
            let customer = "c\(Int.random(in: 0..<customers))"
            let item = ["apple", "pear", "fig"][Int.random(in: 0..<3)]
            await self.add(item, to: customer, key: UUID().uuidString)
          }
        }
      }
    }
  }

  func stop() { self.stopping.store(true, ordering: .relaxed) }

  private func add(_ item: String, to customer: String, key: String) async {
    while true {
      let (url, generation, isFinal) = self.service.withLock {
        ($0.urls.randomElement() ?? "", $0.generation, $0.isFinal)
      }
      var request = HTTPClientRequest(url: "\(url)/carts/\(customer)/items")
      request.method = .POST
      request.headers.add(name: "Idempotency-Key", value: key)
      request.body = .bytes(ByteBuffer(string: #"{"item": "\#(item)", "quantity": 1}"#))
      var status: HTTPResponseStatus?
      var body = ""
      if let response = try? await self.client.execute(request, timeout: .seconds(10)),
        let answer = try? await response.body.collect(upTo: 1 << 20)
      {
        status = response.status
        body = String(buffer: answer)
      }
      if status == .ok {
        let ready = self.service.withLock { service in
          service.answered[customer, default: [:]][item, default: 0] += 1
          service.answeredCount += 1
          var ready: [CheckedContinuation<Void, Never>] = []
          service.countWaiters.removeAll { count, waiter in
            guard service.answeredCount >= count else { return false }
            ready.append(waiter)
            return true
          }
          return ready
        }
        for waiter in ready { waiter.resume() }
        return
      }
      if let status, status != .serviceUnavailable, status != .conflict {
        self.service.withLock { $0.unexpected.append("\(status) for \(customer)") }
        return
      }
      // No answer, or the service is not there yet: the same request again once it is back.
      let refused = self.service.withLock { service in
        service.retries += 1
        service.refusals[service.generation, default: 0] += 1
        service.refusalLog.append(
          (
            generation, service.generation,
            status.map { "\($0.code) from \(url): \(body)" } ?? "no answer from \(url)"
          )
        )
        defer { service.refusalWaiters = [] }
        return service.refusalWaiters
      }
      for waiter in refused { waiter.resume() }
      if isFinal { continue }
      await withCheckedContinuation { continuation in
        let back = self.service.withLock { service -> Bool in
          if service.generation != generation { return true }
          service.waiters.append(continuation)
          return false
        }
        if back { continuation.resume() }
      }
    }
  }

  func shutdown() async { try? await self.client.shutdown() }
}

/// Every cart's items equal the adds answered for it, exactly (none lost, none doubled).
func expectExactlyTheAnsweredAdds(_ driver: RetryingDriver, url: String) async throws {
  for (customer, items) in driver.answered {
    var request = HTTPClientRequest(url: "\(url)/carts/\(customer)")
    request.method = .GET
    let response = try await driver.client.execute(request, timeout: .seconds(10))
    let cart = try JSONDecoder().decode(
      Cart.State.self,
      from: Data(buffer: try await response.body.collect(upTo: 1 << 20))
    )
    #expect(cart.items == items, "\(customer)")
  }
  #expect(driver.unexpected.isEmpty, "\(driver.unexpected.prefix(5))")
}

@Suite(
  .serialized,
  .timeLimit(.minutes(5)),
  .enabled(if: cartServerBinary != nil, "the cart-server binary is not built next to the tests")
)
struct DayTwoProcessTests {
  static var killRounds: Int {
    Int(ProcessInfo.processInfo.environment["KILL_ROUNDS"] ?? "") ?? 10
  }

  @Test func twoServersStartedTogetherOnANewSQLiteFileWithNoOwnerGivenLoseNothing() async throws {
    let directory = try temporaryDirectory()
    defer { try? FileManager.default.removeItem(at: directory) }
    let arguments = ["--storage", "sqlite:\(directory.appendingPathComponent("c.sqlite").path)"]
    // Started together on a file that does not exist yet: both start.
    async let startingA = CartServerProcess(arguments)
    async let startingB = CartServerProcess(arguments)
    let (a, b) = try await (startingA, startingB)
    // Every request to a server at random: under one owner name, both would hold every lease and
    // save over each other's acknowledged adds.
    let driver = RetryingDriver(urls: [a.url, b.url])
    driver.serviceChanged(to: [a.url, b.url], isFinal: true)
    let load = Task { await driver.run(clients: 16, customers: 20) }
    await driver.waitUntilAnswered(600)
    driver.stop()
    await load.value
    try await expectExactlyTheAnsweredAdds(driver, url: a.url)
    try await expectExactlyTheAnsweredAdds(driver, url: b.url)
    #expect(driver.refusalLog.isEmpty, "\(driver.refusalLog.prefix(3))")
    #expect(await a.stop(SIGTERM) == 0)
    #expect(await b.stop(SIGTERM) == 0)
    await driver.shutdown()
  }

  @Test func retriedAddsApplyExactlyOnceAcrossKillsOnSQLite() async throws {
    let directory = try temporaryDirectory()
    defer { try? FileManager.default.removeItem(at: directory) }
    // NB: restarted on another free port, a server is the same owner only by name.
    let arguments = [
      "--storage", "sqlite:\(directory.appendingPathComponent("c.sqlite").path)", "--owner", "a",
    ]
    var server = try await CartServerProcess(arguments)
    let driver = RetryingDriver(url: server.url)
    let load = Task { await driver.run(clients: 16, customers: 100) }
    for round in 1...Self.killRounds {
      await driver.waitUntilAnswered(driver.answeredCount + Int.random(in: 50...300))
      await server.stop(SIGKILL)
      server = try await CartServerProcess(arguments)
      driver.serviceIsBack(at: server.url, isFinal: round == Self.killRounds)
    }
    driver.stop()
    await load.value
    #expect(driver.answeredCount > Self.killRounds * 50)
    // Requests in flight at each kill were retried (some applied before their answer was lost).
    #expect(driver.retries > 0)
    try await expectExactlyTheAnsweredAdds(driver, url: server.url)
    #expect(await server.stop(SIGTERM) == 0)
    await driver.shutdown()
  }

  @Test(.enabled(if: postgresURL != nil, "POSTGRES_URL is not set: no PostgreSQL to test against"))
  func retriedAddsApplyExactlyOnceAcrossAFailoverOnPostgres() async throws {
    let table = "carts_retry_\(UInt32.random(in: 0...UInt32.max))"
    let url = postgresURL!.absoluteString
    let a = try await CartServerProcess(["--storage", url, "--owner", "a", "--table", table])
    let b = try await CartServerProcess(["--storage", url, "--owner", "b", "--table", table])
    let driver = RetryingDriver(url: a.url)
    let load = Task { await driver.run(clients: 16, customers: 100) }
    await driver.waitUntilAnswered(Int.random(in: 200...600))
    await a.stop(SIGKILL)
    // A's leases expire (on the database's clock, moved by SQL rather than by waiting); then the
    // clients' retries go to B.
    try await withPostgres { client, _ in
      try await expireLeases(of: "a", table: table, client)
    }
    driver.serviceIsBack(at: b.url, isFinal: true)
    await driver.waitUntilAnswered(driver.answeredCount + 200)
    driver.stop()
    await load.value
    try await expectExactlyTheAnsweredAdds(driver, url: b.url)
    #expect(await b.stop(SIGTERM) == 0)
    try await withPostgres { client, _ in
      try await client.query("DROP TABLE IF EXISTS \(unescaped: table), \(unescaped: table)_owners")
    }
    await driver.shutdown()
  }

  @Test func aStoredCartThatWouldOverflowIsServedAfterARestartAndTheServerStaysUp() async throws {
    let directory = try temporaryDirectory()
    defer { try? FileManager.default.removeItem(at: directory) }
    let path = directory.appendingPathComponent("c.sqlite").path
    // An earlier run, with no limits, saved an `Int.max` cart.
    let storage = try await SQLiteSessionStorage<String, Cart.State>(path: path, table: "carts")
    let token = try #require(
      try await storage.acquire("poison", owner: "old").token,
      "the lease was not acquired"
    )
    let poison = Cart.State(customer: "poison", items: ["apple": .max], version: 7)
    let saved = try await storage.save(
      [SessionWrite(key: "poison", state: poison, token: token)],
      owner: "old"
    )
    #expect(saved == [.saved])
    try await storage.release([SessionLease(key: "poison", token: token)], owner: "old")

    let server = try await CartServerProcess(["--storage", "sqlite:\(path)"])
    let driver = Driver()
    for _ in 0..<3 {
      let add = try await post(driver.client, "\(server.url)/carts/poison/items", "apple")
      #expect(add.status == .badRequest)
      #expect(add.body.contains("error"))
    }
    let pear = try await post(driver.client, "\(server.url)/carts/poison/items", "pear")
    #expect(pear.status == .ok)
    var read = HTTPClientRequest(url: "\(server.url)/carts/poison")
    read.method = .GET
    let response = try await driver.client.execute(read, timeout: .seconds(10))
    let cart = try JSONDecoder().decode(
      Cart.State.self,
      from: Data(buffer: try await response.body.collect(upTo: 1 << 20))
    )
    #expect(cart.items == ["apple": .max, "pear": 1])
    #expect(await server.stop(SIGTERM) == 0)
    await driver.shutdown()
  }

  @Test func anErasureIsDurableBeforeItsAnswerOnSQLite() async throws {
    let directory = try temporaryDirectory()
    defer { try? FileManager.default.removeItem(at: directory) }
    let path = directory.appendingPathComponent("c.sqlite").path
    let secret = "secret-item-8e41b"
    // NB: restarted on another free port, a server is the same owner only by name.
    try await eraseThenKill(["--storage", "sqlite:\(path)", "--owner", "a"], secret: secret)
    for suffix in ["", "-wal"] {
      guard let bytes = FileManager.default.contents(atPath: path + suffix) else { continue }
      #expect(bytes.range(of: Data(secret.utf8)) == nil)
      #expect(bytes.range(of: Data("erased-customer".utf8)) == nil)
    }
  }

  @Test(.enabled(if: postgresURL != nil, "POSTGRES_URL is not set: no PostgreSQL to test against"))
  func anErasureIsDurableBeforeItsAnswerOnPostgres() async throws {
    let table = "carts_erase_\(UInt32.random(in: 0...UInt32.max))"
    try await eraseThenKill(
      ["--storage", postgresURL!.absoluteString, "--owner", "a", "--table", table],
      secret: "secret-item-3c9d0"
    )
    try await withPostgres { client, _ in
      let rows = try await client.query(
        "SELECT count(*)::int8 FROM \(unescaped: table) WHERE key = 'erased-customer'"
      )
      for try await count in rows.decode(Int64.self) { #expect(count == 0) }
      try await client.query("DROP TABLE IF EXISTS \(unescaped: table), \(unescaped: table)_owners")
    }
  }
}

/// Adds a secret item to a cart, erases it (204), SIGKILLs the server at once, restarts it and
/// finds the cart empty while the other cart kept its item.
private func eraseThenKill(_ arguments: [String], secret: String) async throws {
  let driver = Driver()
  do {
    try await eraseThenKill(arguments, secret: secret, driver: driver)
  } catch {
    // NB: a client dropped without its shutdown traps, which would end every other test too.
    await driver.shutdown()
    throw error
  }
  await driver.shutdown()
}

private func eraseThenKill(_ arguments: [String], secret: String, driver: Driver) async throws {
  let server = try await CartServerProcess(arguments)
  #expect(
    try await post(driver.client, "\(server.url)/carts/erased-customer/items", secret).status == .ok
  )
  #expect(
    try await post(driver.client, "\(server.url)/carts/kept-customer/items", "apple").status == .ok
  )
  var erase = HTTPClientRequest(url: "\(server.url)/carts/erased-customer")
  erase.method = .DELETE
  #expect(try await driver.client.execute(erase, timeout: .seconds(10)).status == .noContent)
  await server.stop(SIGKILL)
  let restarted = try await CartServerProcess(arguments)
  for (customer, items) in [("erased-customer", [String: Int]()), ("kept-customer", ["apple": 1])] {
    var read = HTTPClientRequest(url: "\(restarted.url)/carts/\(customer)")
    read.method = .GET
    let response = try await driver.client.execute(read, timeout: .seconds(10))
    let cart = try JSONDecoder().decode(
      Cart.State.self,
      from: Data(buffer: try await response.body.collect(upTo: 1 << 20))
    )
    #expect(cart.items == items, "\(customer)")
  }
  #expect(await restarted.stop(SIGTERM) == 0)
}

/// POSTs one of `item` and returns the status and body.
private func post(
  _ client: HTTPClient,
  _ url: String,
  _ item: String
) async throws -> (status: HTTPResponseStatus, body: String) {
  var request = HTTPClientRequest(url: url)
  request.method = .POST
  request.body = .bytes(ByteBuffer(string: #"{"item": "\#(item)", "quantity": 1}"#))
  let response = try await client.execute(request, timeout: .seconds(10))
  return (response.status, String(buffer: try await response.body.collect(upTo: 1 << 20)))
}

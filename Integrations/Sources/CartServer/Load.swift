import AsyncHTTPClient
import Foundation
import NIOCore
import Synchronization

/// `cart-server load`'s options.
struct LoadOptions: Sendable {
  /// The instances; each request goes to the next in turn.
  var urls = ["http://127.0.0.1:8080"]
  /// The first instance (where the final read of the carts goes).
  var url: String { self.urls[0] }
  var clients = 64
  var seconds = 10
  var customers = 1_000
  init() {}
}

/// What a load run saw.
struct LoadReport: Sendable, CustomStringConvertible {
  var requests = 0
  var errors = 0
  var p50: Double = 0
  var p99: Double = 0
  var acknowledged = 0
  var lost = 0

  var description: String {
    String(
      format: "load: %d requests, %d errors, p50 %.2f ms, p99 %.2f ms, acknowledged %d, lost %d",
      self.requests,
      self.errors,
      self.p50,
      self.p99,
      self.acknowledged,
      self.lost
    )
  }
}

/// Acknowledged adds per customer and item, and latencies, shared by the clients.
final class LoadTally: Sendable {
  private struct Counts {
    var acknowledged: [String: [String: Int]] = [:]
    var latencies: [Double] = []
    var requests = 0
    var errors = 0
  }
  private let counts = Mutex(Counts())
  private let turns = Atomic(0)

  /// The next request's turn (which instance it goes to, round-robin).
  func nextTurn() -> Int { self.turns.add(1, ordering: .relaxed).oldValue }

  func record(customer: String, item: String, milliseconds: Double, acknowledged: Bool) {
    self.counts.withLock { counts in
      counts.requests += 1
      counts.latencies.append(milliseconds)
      if acknowledged {
        counts.acknowledged[customer, default: [:]][item, default: 0] += 1
      } else {
        counts.errors += 1
      }
    }
  }

  var progress: (requests: Int, errors: Int) {
    self.counts.withLock { ($0.requests, $0.errors) }
  }

  var acknowledged: [String: [String: Int]] {
    self.counts.withLock { $0.acknowledged }
  }

  var latencies: [Double] {
    self.counts.withLock { $0.latencies }
  }
}

/// Drives `clients` concurrent clients adding items for `seconds`, then reads every cart it
/// touched and counts the acknowledged adds missing from it.
func runLoad(
  _ options: LoadOptions,
  progress: @escaping @Sendable (String) -> Void
) async throws
  -> LoadReport
{
  var configuration = HTTPClient.Configuration()
  configuration.connectionPool.concurrentHTTP1ConnectionsPerHostSoftLimit = max(8, options.clients)
  configuration.timeout.connect = .seconds(5)
  let client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
  do {
    let report = try await drive(options, client: client, progress: progress)
    try await client.shutdown()
    return report
  } catch {
    try? await client.shutdown()
    throw error
  }
}

private func drive(
  _ options: LoadOptions,
  client: HTTPClient,
  progress: @escaping @Sendable (String) -> Void
) async throws -> LoadReport {
  let tally = LoadTally()
  let deadline = ContinuousClock.now + .seconds(options.seconds)
  let items = ["apple", "pear", "plum", "fig", "kiwi"]
  try await withThrowingTaskGroup(of: Void.self) { group in
    for clientIndex in 0..<options.clients {
      group.addTask {
        var random = SystemRandomNumberGenerator()
        _ = clientIndex
        while ContinuousClock.now < deadline {
          let customer = "c\(Int.random(in: 0..<options.customers, using: &random))"
          let item = items[Int.random(in: 0..<items.count, using: &random)]
          let url = options.urls[tally.nextTurn() % options.urls.count]
          var request = HTTPClientRequest(url: "\(url)/carts/\(customer)/items")
          request.method = .POST
          request.headers.add(name: "content-type", value: "application/json")
          request.body = .bytes(ByteBuffer(string: #"{"item": "\#(item)", "quantity": 1}"#))
          let start = ContinuousClock.now
          var ok = false
          do {
            let response = try await client.execute(request, timeout: .seconds(30))
            _ = try await response.body.collect(upTo: 1 << 20)
            ok = response.status == .ok
          } catch {
            ok = false
          }
          let elapsed = start.duration(to: .now)
          tally.record(
            customer: customer,
            item: item,
            milliseconds: Double(elapsed.components.attoseconds) / 1e15
              + Double(elapsed.components.seconds) * 1e3,
            acknowledged: ok
          )
          if !ok { try await Task.sleep(for: .milliseconds(10)) }
        }
      }
    }
    group.addTask {
      var second = 0
      while ContinuousClock.now < deadline {
        try await Task.sleep(for: .seconds(1))
        second += 1
        let (requests, errors) = tally.progress
        progress("load: \(second) s, \(requests) requests, \(errors) errors")
      }
    }
    try await group.waitForAll()
  }
  var report = LoadReport()
  (report.requests, report.errors) = tally.progress
  let latencies = tally.latencies.sorted()
  if !latencies.isEmpty {
    report.p50 = latencies[latencies.count / 2]
    report.p99 = latencies[min(latencies.count - 1, latencies.count * 99 / 100)]
  }
  let acknowledged = tally.acknowledged
  report.acknowledged = acknowledged.values.reduce(0) { $0 + $1.values.reduce(0, +) }
  report.lost = try await countLost(acknowledged, url: options.url, client: client)
  return report
}

/// Reads each cart and counts acknowledged adds that are not in it.
func countLost(
  _ acknowledged: [String: [String: Int]],
  url: String,
  client: HTTPClient
) async throws -> Int {
  var lost = 0
  for (customer, items) in acknowledged {
    let response = try await client.execute(
      HTTPClientRequest(url: "\(url)/carts/\(customer)"),
      timeout: .seconds(30)
    )
    let body = try await response.body.collect(upTo: 1 << 20)
    guard response.status == .ok else {
      throw LoadError("reading the cart of \(customer) answered \(response.status)")
    }
    let cart = try JSONDecoder().decode(Cart.State.self, from: Data(buffer: body))
    for (item, count) in items { lost += max(0, count - (cart.items[item] ?? 0)) }
  }
  return lost
}

/// A load run that could not check its result.
struct LoadError: Error, CustomStringConvertible {
  let description: String
  init(_ description: String) { self.description = description }
}

import Foundation
import GRDB
import PostgresNIO
import Synchronization
import Unidirectional
import UnidirectionalPostgres
import UnidirectionalSQLite

/// A session whose every action changes its state (the bytes a save writes).
struct Counter: Reducer {
  struct State: Codable, Sendable {
    var key: String
    var count = 0
  }
  enum Action: Sendable { case increment }

  func reduce(into state: inout State, action: Action) -> Effect<Action> {
    state.count += 1
    return .none
  }
}

struct Figures {
  var perSecond: Double
  var p50: Double
  var p99: Double
  /// States per save, and sends per save (as the senders saw their batches).
  var statesPerSave = 0.0
  var sendsPerSave = 0.0
}

func milliseconds(_ duration: Duration) -> Double {
  Double(duration.components.seconds) * 1e3 + Double(duration.components.attoseconds) / 1e15
}

/// `senders` tasks each sending to random keys for `seconds`; every send waits for its ack.
@concurrent
func drive(
  senders: Int,
  keys: Int,
  seconds: Int,
  _ send: @escaping @Sendable (String) async throws -> Void
) async -> Figures {
  let clock = ContinuousClock()
  let start = clock.now
  let deadline = start + .seconds(seconds)
  let latencies = await withTaskGroup(of: [Double].self) { group in
    for _ in 0..<senders {
      group.addTask {
        var latencies: [Double] = []
        while clock.now < deadline {
          let key = "k\(Int.random(in: 0..<keys))"
          let begin = clock.now
          do { try await send(key) } catch { continue }
          latencies.append(milliseconds(begin.duration(to: clock.now)))
        }
        return latencies
      }
    }
    var all: [Double] = []
    for await part in group { all += part }
    return all.sorted()
  }
  let elapsed = milliseconds(start.duration(to: clock.now)) / 1e3
  guard !latencies.isEmpty else { return Figures(perSecond: 0, p50: .nan, p99: .nan) }
  return Figures(
    perSecond: Double(latencies.count) / elapsed,
    p50: latencies[latencies.count / 2],
    p99: latencies[latencies.count * 99 / 100]
  )
}

/// The floor: the same rows written by the driver alone, in batches of `batch` per transaction
/// (as a group commit with that many waiting sends would), in a loop.
@concurrent
func floorLoop(
  seconds: Int,
  batch: Int,
  _ write: @escaping @Sendable ([String]) async throws -> Void
)
  async -> Double
{
  let clock = ContinuousClock()
  let start = clock.now
  let deadline = start + .seconds(seconds)
  var rows = 0
  while clock.now < deadline {
    let keys = (0..<batch).map { _ in "k\(Int.random(in: 0..<1_000))" }
    do {
      try await write(keys)
      rows += batch
    } catch {
      print("floor write failed: \(error)")
      return 0
    }
  }
  return Double(rows) / (milliseconds(start.duration(to: clock.now)) / 1e3)
}

/// Activation latency: passivate each key, then time the send that brings it back.
func activations(
  _ registry: StoreRegistry<String, Counter>,
  count: Int
) async throws -> (Double, Double) {
  var latencies: [Double] = []
  let clock = ContinuousClock()
  for index in 0..<count {
    let key = "k\(index)"
    try await registry.passivate(key)
    let begin = clock.now
    try await registry.send(.increment, to: key)
    latencies.append(milliseconds(begin.duration(to: clock.now)))
  }
  latencies.sort()
  return (latencies[latencies.count / 2], latencies[latencies.count * 99 / 100])
}

nonisolated(unsafe) var misses: [String] = []  // Safety: written and read by `main` only, in order.

func row(
  _ name: String,
  _ value: String,
  floor: String,
  ratio: String,
  target: String,
  missed: Bool
) {
  let padded = name.padding(toLength: 52, withPad: " ", startingAt: 0)
  print(
    "\(padded) \(value.padding(toLength: 14, withPad: " ", startingAt: 0)) \(floor.padding(toLength: 12, withPad: " ", startingAt: 0)) \(ratio.padding(toLength: 7, withPad: " ", startingAt: 0)) \(target)\(missed ? "  MISS" : "")"
  )
  if missed { misses.append(name) }
}

/// One backend's rows: sends with 64 and 512 senders against the driver's floor, the idempotent
/// send against the plain one, and activation.
func report(
  _ backend: String,
  _ cases: Cases,
  floor: Double,
  p99Target: Double,
  activation: (Double, Double),
  activationTarget: Double
) {
  for (senders, figures, minimum) in [(64, cases.plain, 0.6), (512, cases.many, 0.85)] {
    let ratio = figures.perSecond / floor
    row(
      "\(backend): acknowledged sends/s (1,000 keys, \(senders) senders)",
      String(format: "%.0f", figures.perSecond),
      floor: String(format: "%.0f", floor),
      ratio: String(format: "%.2fx", ratio),
      target: "≥\(minimum)x the driver writing the same rows in batches of 64",
      missed: ratio < minimum
    )
    row(
      "\(backend): its batches: states / sends per save",
      String(format: "%.1f / %.1f", figures.statesPerSave, figures.sendsPerSave),
      floor: "",
      ratio: "",
      target: "(no target)",
      missed: false
    )
    row(
      "\(backend): its acknowledgement p50 / p99 ms",
      String(format: "%.2f / %.2f", figures.p50, figures.p99),
      floor: "",
      ratio: "",
      target: senders == 64 ? "p99 ≤\(Int(p99Target)) ms" : "(no target)",
      missed: senders == 64 && figures.p99 > p99Target
    )
  }
  let cost = cases.plain.perSecond / cases.idempotent.perSecond
  row(
    "\(backend): idempotent sends/s (64 senders, a new key each)",
    String(format: "%.0f", cases.idempotent.perSecond),
    floor: String(format: "%.0f", cases.plain.perSecond),
    ratio: String(format: "%.2fx", cost),
    target: "≤1.2x the plain send's cost (its throughput over this one's)",
    missed: cost > 1.2
  )
  let windowCost = cases.plain.perSecond / cases.windowed.perSecond
  row(
    "\(backend): plain sends/s to sessions holding a window",
    String(format: "%.0f", cases.windowed.perSecond),
    floor: String(format: "%.0f", cases.plain.perSecond),
    ratio: String(format: "%.2fx", windowCost),
    target: "(no target: what a kept window costs a plain save)",
    missed: false
  )
  row(
    "\(backend): activation of a passivated key p50 / p99 ms",
    String(format: "%.2f / %.2f", activation.0, activation.1),
    floor: "",
    ratio: "",
    target: "p99 ≤\(activationTarget) ms",
    missed: activation.1 > activationTarget
  )
}

/// The send cases of one backend, each on a registry of its own over the same storage.
struct Cases {
  var plain: Figures
  var many: Figures
  var idempotent: Figures
  /// Plain sends to the sessions the idempotent case left, each holding a window of keys.
  var windowed: Figures
}

/// Runs the send cases, each on a table of its own from `makeStorage` (as the floor writes a
/// table of its own: rows one case left, such as idempotency windows, would weigh on the next),
/// then times activations on the last registry.
func runCases(
  seconds: Int,
  _ makeStorage: @Sendable (String) async throws -> any SessionStorage<String, Counter.State>
) async throws -> (Cases, activation: (Double, Double)) {
  func measure(
    senders: Int,
    table: String,
    _ send: @escaping @Sendable (StoreRegistry<String, Counter>, String) async throws -> Void
  ) async throws -> (Figures, StoreRegistry<String, Counter>) {
    let registry = makeRegistry(try await makeStorage(table))
    var figures = await drive(senders: senders, keys: 1_000, seconds: seconds) { key in
      try await send(registry, key)
    }
    let statistics = registry.saveStatistics
    figures.statesPerSave = statistics.meanBatchSize
    figures.sendsPerSave =
      statistics.saves == 0 ? 0 : Double(statistics.sends) / Double(statistics.saves)
    return (figures, registry)
  }
  var (plain, registry) = try await measure(senders: 64, table: "plain") {
    try await $0.send(.increment, to: $1)
  }
  await registry.shutdown(gracePeriod: .seconds(1))
  let idempotent: Figures
  (idempotent, registry) = try await measure(senders: 64, table: "idempotent") { registry, key in
    try await registry.send(.increment, to: key, idempotencyKey: UUID().uuidString)
  }
  await registry.shutdown(gracePeriod: .seconds(1))
  let windowed: Figures
  (windowed, registry) = try await measure(senders: 64, table: "idempotent") {
    try await $0.send(.increment, to: $1)
  }
  await registry.shutdown(gracePeriod: .seconds(1))
  let many: Figures
  (many, registry) = try await measure(senders: 512, table: "many") {
    try await $0.send(.increment, to: $1)
  }
  let activation = try await activations(registry, count: 1_000)
  await registry.shutdown(gracePeriod: .seconds(1))
  return (Cases(plain: plain, many: many, idempotent: idempotent, windowed: windowed), activation)
}

func makeRegistry(
  _ storage: any SessionStorage<String, Counter.State>
) -> StoreRegistry<String, Counter> {
  StoreRegistry(storage: storage, owner: "bench") {
    Counter.State(key: $0)
  } reducer: {
    Counter()
  }
}

@main
enum StorageBenchmarks {
  static func main() async throws {
    let seconds = Int(ProcessInfo.processInfo.environment["BENCH_SECONDS"] ?? "") ?? 5
    print(
      "storage benchmarks: \(seconds) s per case, release build expected; floors measured in the same run"
    )
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
      "storage-bench-\(UUID())"
    )
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: directory) }

    // SQLite.
    let path = directory.appendingPathComponent("bench.sqlite").path
    let (cases, activation) = try await runCases(seconds: seconds) { table in
      try await SQLiteSessionStorage<String, Counter.State>(path: path, table: table)
    }
    let pool = try DatabasePool(path: directory.appendingPathComponent("floor.sqlite").path)
    try await pool.writeWithoutTransaction { db in
      try db.execute(sql: "PRAGMA synchronous = FULL")
      try db.execute(sql: "CREATE TABLE bench (key TEXT PRIMARY KEY, state BLOB)")
    }
    let encoder = JSONEncoder()
    let floor = await floorLoop(seconds: seconds, batch: 64) { keys in
      let rows = try keys.map { ($0, try encoder.encode(Counter.State(key: $0, count: 1))) }
      try await pool.write { db in
        let statement = try db.cachedStatement(
          sql:
            "INSERT INTO bench (key, state) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET state = excluded.state"
        )
        for (key, data) in rows { try statement.execute(arguments: [key, data]) }
      }
    }
    report(
      "SQLite",
      cases,
      floor: floor,
      p99Target: 10,
      activation: activation,
      activationTarget: 1
    )

    // Postgres, when a database is given.
    if let text = ProcessInfo.processInfo.environment["POSTGRES_URL"], let url = URL(string: text) {
      let client = PostgresClient(
        configuration: .init(
          host: url.host ?? "127.0.0.1",
          port: url.port ?? 5432,
          username: url.user ?? "postgres",
          password: nil,
          database: String(url.path.dropFirst()),
          tls: .disable
        )
      )
      let run = Task { await client.run() }
      let table = "bench_\(UInt32.random(in: 0...UInt32.max))"
      let (cases, activation) = try await runCases(seconds: seconds) { name in
        try await PostgresSessionStorage<String, Counter.State>(
          client: client,
          table: "\(table)_\(name)"
        )
      }
      try await client.query(
        "CREATE TABLE \(unescaped: table)_floor (key text PRIMARY KEY, state bytea)"
      )
      let floor = await floorLoop(seconds: seconds, batch: 64) { keys in
        let unique = Array(Set(keys))
        let states = try unique.map {
          ByteBuffer(data: try encoder.encode(Counter.State(key: $0, count: 1)))
        }
        try await client.query(
          """
          INSERT INTO \(unescaped: table)_floor (key, state)
          SELECT * FROM UNNEST(\(unique)::text[], \(states)::bytea[])
          ON CONFLICT (key) DO UPDATE SET state = excluded.state
          """
        )
      }
      for name in ["plain", "idempotent", "many"] {
        try await client.query("DROP TABLE \(unescaped: table)_\(unescaped: name)")
      }
      try await client.query("DROP TABLE \(unescaped: table)_floor")
      run.cancel()
      report(
        "Postgres",
        cases,
        floor: floor,
        p99Target: 15,
        activation: activation,
        activationTarget: 5
      )
    } else {
      print(
        "Postgres: skipped (POSTGRES_URL is not set; `eval \"$(.ci/postgres start)\"` starts one)"
      )
    }
    print(
      misses.isEmpty ? "misses: none" : "misses: \(misses.count): \(misses.joined(separator: "; "))"
    )
  }
}

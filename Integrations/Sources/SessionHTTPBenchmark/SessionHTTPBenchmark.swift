import Foundation
import Hummingbird
import Logging
import NIOCore
import ServiceLifecycle
import Synchronization
import Unidirectional
import UnidirectionalServer

// The session request of wave 3's effect-cost issue, measured where its user met it: a
// Hummingbird 2 server with a session per key, driven over HTTP by `wrk` (Debian's package) with
// 64 connections spread over 1,000 keys. One server answers both sides, so they share every
// cost of HTTP: `/store/{key}` sends to a `StoreRegistry` and reads the count back;
// `/actor/{key}` calls a plain actor per session (the floor), which does the same work inline
// and leaves idle expiry to one sweeper task. The two sides alternate in rounds, and each ratio
// is the median of the rounds'.

/// A session: each request counts, re-arms an idle timer and persists a snapshot.
struct Session: Reducer {
  struct State: Sendable {
    var requests = 0
  }

  enum Action: Sendable {
    case request
    case idle
    case countOnly
    case timerOnly
    case runOnly
  }

  enum TimerID: Hashable, Sendable { case idle }

  func reduce(into state: inout State, action: Action) -> Effect<Action> {
    switch action {
    case .request:
      state.requests += 1
      let snapshot = state
      return .merge(
        .send(.idle, after: .seconds(300), clock: ContinuousClock())
          .cancellable(id: TimerID.idle, cancelInFlight: true)
          .cancelledOnShutdown(),
        .run { _ in persist(snapshot.requests) }
      )
    case .idle:
      return .none
    case .countOnly:
      state.requests += 1
      return .none
    case .timerOnly:
      state.requests += 1
      return .send(.idle, after: .seconds(300), clock: ContinuousClock())
        .cancellable(id: TimerID.idle, cancelInFlight: true)
        .cancelledOnShutdown()
    case .runOnly:
      state.requests += 1
      let snapshot = state
      return .run { _ in persist(snapshot.requests) }
    }
  }
}

/// The persist work of a request, the same on both sides.
@inline(never)
func persist(_ requests: Int) {
  if requests == -42 { print("never") }
}

/// The floor's session: the same work inline, its idle deadline read by the sweeper.
actor PlainSession {
  var requests = 0
  var idleDeadline = ContinuousClock.now

  func request() -> Int {
    self.requests += 1
    self.idleDeadline = .now + .seconds(300)
    persist(self.requests)
    return self.requests
  }

  func isIdle(at now: ContinuousClock.Instant) -> Bool {
    self.idleDeadline <= now
  }
}

/// The floor's registry: a dictionary of plain actors under a lock, created on first use, swept
/// once a second by one task.
final class PlainSessions: Sendable {
  private let sessions = Mutex<[String: PlainSession]>([:])

  func session(_ key: String) -> PlainSession {
    self.sessions.withLock { sessions in
      if let session = sessions[key] { return session }
      let session = PlainSession()
      sessions[key] = session
      return session
    }
  }

  /// Removes the sessions idle past their deadline, once a second, until cancelled.
  func sweep() async {
    while !Task.isCancelled {
      try? await Task.sleep(for: .seconds(1))
      let now = ContinuousClock.now
      for (key, session) in self.sessions.withLock({ $0 }) where await session.isIdle(at: now) {
        self.sessions.withLock { _ = $0.removeValue(forKey: key) }
      }
    }
  }
}

/// What one `wrk` run reported.
struct LoadFigures {
  var perSecond: Double
  /// Milliseconds.
  var p50: Double
  var p99: Double
  /// Responses that were not 2xx or 3xx, and socket errors.
  var errors: Int
  /// The server's CPU time per request (this process's, not `wrk`'s), in microseconds.
  var cpuPerRequest: Double = 0
  /// The server's context switches per request, voluntary and involuntary.
  var switchesPerRequest: Double = 0
}

/// This process's usage so far, every thread's, not its children's: CPU time (user and system)
/// in microseconds, and context switches (voluntary and involuntary).
func processUsage() -> (cpu: Double, switches: Double) {
  var usage = rusage()
  getrusage(RUSAGE_SELF.rawValue, &usage)
  let cpu =
    Double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) * 1e6
    + Double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec)
  return (cpu, Double(usage.ru_nvcsw + usage.ru_nivcsw))
}

/// A failure to run or read `wrk`, with what to do about it.
struct BenchmarkError: Error, CustomStringConvertible {
  let description: String
  init(_ description: String) { self.description = description }
}

struct Options {
  var seconds = 5
  var rounds = 3
  var connections = 64
  var threads = 2
  var keys = 1_000
  /// Drives only this route for `seconds`, cold, and prints its figures.
  ///
  /// For profiling one side (`perf` around the process). `none`, `timer` and `run` send an action
  /// that does only that part of the session request; `nosend` answers without a session;
  /// `observed` is `store` on the registry whose stores and registry are observed; `immediate` is the floor's request followed by a bare `Task.immediateDetached`; `nonetask`
  /// is `none`'s registry send followed by the same bare task, so that against `run` it leaves
  /// only the library's bookkeeping of a `.run` to compare.
  var only: String?
  /// The routes `--only` takes.
  static let routes = [
    "store", "observed", "actor", "none", "timer", "run", "nosend", "immediate", "nonetask",
  ]

  init(arguments: [String]) throws {
    var rest = arguments.dropFirst()
    while let flag = rest.popFirst() {
      if flag == "--only" {
        guard let side = rest.popFirst(), Self.routes.contains(side) else {
          throw BenchmarkError("--only takes one of: \(Self.routes.joined(separator: ", "))")
        }
        self.only = side
        continue
      }
      guard let text = rest.popFirst(), let value = Int(text), value > 0 else {
        throw BenchmarkError("\(flag) needs a positive whole number")
      }
      switch flag {
      case "--seconds": self.seconds = value
      case "--rounds": self.rounds = value
      case "--connections": self.connections = value
      case "--threads": self.threads = value
      case "--keys": self.keys = value
      default:
        throw BenchmarkError(
          "unknown option \(flag); options: --seconds --rounds --connections --threads --keys"
        )
      }
    }
  }
}

/// Finds `wrk` on the `PATH`.
func findWrk() throws -> String {
  let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
  for directory in path.split(separator: ":") {
    let candidate = "\(directory)/wrk"
    if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
  }
  throw BenchmarkError("wrk is not on the PATH: install Debian's package (apt-get install wrk)")
}

/// Writes a `wrk` script that requests `prefix` followed by a random key below `keys`.
func writeScript(prefix: String, keys: Int, in directory: URL) throws -> String {
  let url = directory.appendingPathComponent(
    "\(prefix.replacingOccurrences(of: "/", with: "")).lua"
  )
  let script = """
    math.randomseed(os.time())
    request = function()
      return wrk.format("GET", "\(prefix)" .. math.random(0, \(keys - 1)))
    end
    """
  try script.write(to: url, atomically: true, encoding: .utf8)
  return url.path
}

/// Runs `wrk` against `port` with `script` for `seconds` and reads its report.
func runWrk(
  _ wrk: String,
  port: Int,
  script: String,
  seconds: Int,
  options: Options
) throws -> LoadFigures {
  let process = Process()
  process.executableURL = URL(fileURLWithPath: wrk)
  process.arguments = [
    "-t\(options.threads)", "-c\(options.connections)", "-d\(seconds)s", "--latency",
    "-s", script, "http://127.0.0.1:\(port)",
  ]
  let output = Pipe()
  process.standardOutput = output
  process.standardError = output
  let before = processUsage()
  try process.run()
  let data = output.fileHandleForReading.readDataToEndOfFile()
  process.waitUntilExit()
  let after = processUsage()
  let text = String(decoding: data, as: UTF8.self)
  guard process.terminationStatus == 0 else {
    throw BenchmarkError("wrk exited with \(process.terminationStatus):\n\(text)")
  }
  var figures = try parseWrk(text)
  let requests = figures.perSecond * Double(seconds)
  figures.cpuPerRequest = (after.cpu - before.cpu) / requests
  figures.switchesPerRequest = (after.switches - before.switches) / requests
  return figures
}

/// Reads `Requests/sec`, the 50% and 99% latencies and the error counts of a `wrk --latency`
/// report.
func parseWrk(_ text: String) throws -> LoadFigures {
  var perSecond: Double?
  var p50: Double?
  var p99: Double?
  var errors = 0
  for line in text.split(separator: "\n") {
    let fields = line.split(separator: " ", omittingEmptySubsequences: true)
    guard let first = fields.first else { continue }
    switch first {
    case "Requests/sec:":
      perSecond = fields.count > 1 ? Double(fields[1]) : nil
    case "50%":
      p50 = fields.count > 1 ? milliseconds(fields[1]) : nil
    case "99%":
      p99 = fields.count > 1 ? milliseconds(fields[1]) : nil
    case "Non-2xx":
      errors += fields.last.flatMap { Int($0) } ?? 1
    case "Socket":
      // "Socket errors: connect 0, read 0, write 0, timeout 0"
      errors += fields.compactMap { Int($0.trimmingCharacters(in: [","])) }.reduce(0, +)
    default:
      continue
    }
  }
  guard let perSecond, let p50, let p99 else {
    throw BenchmarkError("could not read wrk's report:\n\(text)")
  }
  return LoadFigures(perSecond: perSecond, p50: p50, p99: p99, errors: errors)
}

/// `470.00us`, `1.23ms` or `2.00s` in milliseconds.
func milliseconds(_ text: Substring) -> Double? {
  for (unit, scale) in [("us", 1e-3), ("ms", 1.0), ("s", 1e3)] where text.hasSuffix(unit) {
    return Double(text.dropLast(unit.count)).map { $0 * scale }
  }
  return nil
}

func median(_ values: [Double]) -> Double {
  let sorted = values.sorted()
  return sorted[sorted.count / 2]
}

func format(_ value: Double, digits: Int) -> String {
  String(format: "%.\(digits)f", value)
}

/// One row: the library's figure, the floor's, their ratio, the target and `MISS` when missed.
func row(
  _ name: String,
  _ value: String,
  _ floor: String,
  _ ratio: String,
  _ target: String,
  missed: Bool
) {
  func pad(_ text: String, _ width: Int) -> String {
    text.padding(toLength: max(width, text.count), withPad: " ", startingAt: 0)
  }
  print(
    "\(pad(name, 44)) \(pad(value, 18)) \(pad(floor, 18)) \(pad(ratio, 7)) \(target)"
      + (missed ? "  MISS" : "")
  )
}

/// Stops the server gracefully (its task then ends), the sweeper and the registry.
func stop(
  _ registry: StoreRegistry<String, Session>,
  _ services: ServiceGroup,
  _ sweeper: Task<Void, Never>
) async {
  await services.triggerGracefulShutdown()
  sweeper.cancel()
  await registry.shutdown(gracePeriod: .seconds(1))
}

@main
struct SessionHTTPBenchmark {
  static func main() async {
    do {
      try await self.run(Options(arguments: CommandLine.arguments))
    } catch {
      print("session-http-benchmark: \(error)")
      exit(1)
    }
  }

  static func run(_ options: Options) async throws {
    let wrk = try findWrk()
    let directory = FileManager.default.temporaryDirectory
      .appendingPathComponent("session-http-benchmark-\(getpid())")
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: directory) }
    let storeScript = try writeScript(prefix: "/store/", keys: options.keys, in: directory)
    let actorScript = try writeScript(prefix: "/actor/", keys: options.keys, in: directory)
    let observedScript = try writeScript(prefix: "/observed/", keys: options.keys, in: directory)

    let registry = StoreRegistry(idleTimeout: .seconds(300)) { (_: String) in
      Session.State()
    } reducer: {
      Session()
    }
    // The same sessions with everything a production server attaches: logs, metrics and traces
    // for every store and for the registry, on swift-log's, swift-metrics' and
    // swift-distributed-tracing's no-op backends (so the row is what observing costs the runtime,
    // not what a backend costs).
    let silent = Logger(label: "session", factory: { _ in SwiftLogNoOpLogHandler() })
    let observed = StoreRegistry(
      idleTimeout: .seconds(300),
      observer: { key in
        ObserverGroup<Session.State, Session.Action>(
          LoggingObserver(logger: silent, key: key),
          MetricsObserver(),
          TracingObserver(key: key)
        )
      },
      registryObserver: SessionObserverGroup(SessionMetrics(), SessionTracing())
    ) { (_: String) in
      Session.State()
    } reducer: {
      Session()
    }
    let plain = PlainSessions()
    let router = Router()
    router.get("/observed/:key") { _, context -> String in
      let key = try context.parameters.require("key")
      return String(try await observed.send(.request, to: key, reading: { $0.requests }))
    }
    let registryRoutes: [(String, Session.Action)] = [
      ("store", .request), ("none", .countOnly), ("timer", .timerOnly), ("run", .runOnly),
    ]
    for (route, action) in registryRoutes {
      router.get(RouterPath("/\(route)/:key")) { _, context -> String in
        let key = try context.parameters.require("key")
        return String(try await registry.send(action, to: key, reading: { $0.requests }))
      }
    }
    router.get("/nonetask/:key") { _, context -> String in
      let key = try context.parameters.require("key")
      let count = try await registry.send(.countOnly, to: key, reading: { $0.requests })
      Task.immediateDetached { persist(count) }
      return String(count)
    }
    router.get("/nosend/:key") { _, context -> String in
      let key = try context.parameters.require("key")
      return key
    }
    router.get("/immediate/:key") { _, context -> String in
      let key = try context.parameters.require("key")
      let count = await plain.session(key).request()
      Task.immediateDetached { persist(count) }
      return String(count)
    }
    router.get("/actor/:key") { _, context -> String in
      let key = try context.parameters.require("key")
      return String(await plain.session(key).request())
    }
    var logger = Logger(label: "session-http-benchmark")
    logger.logLevel = .warning
    let port = Mutex<Int?>(nil)
    let (running, runningContinuation) = AsyncStream.makeStream(of: Void.self)
    let app = Application(
      router: router,
      configuration: .init(address: .hostname("127.0.0.1", port: 0)),
      onServerRunning: { channel in
        port.withLock { $0 = channel.localAddress?.port }
        runningContinuation.finish()
      },
      logger: logger
    )

    let services = ServiceGroup(
      configuration: .init(services: [app], gracefulShutdownSignals: [], logger: logger)
    )
    try await withThrowingTaskGroup(of: Void.self) { group in
      group.addTask { try await services.run() }
      let sweeper = Task { await plain.sweep() }
      for await _ in running {}
      guard let port = port.withLock({ $0 }) else {
        throw BenchmarkError("the server did not report its port")
      }
      print(
        "Session request over HTTP: Hummingbird 2 on 127.0.0.1:\(port), wrk -t\(options.threads) "
          + "-c\(options.connections), \(options.keys) keys, \(options.rounds) rounds of "
          + "\(options.seconds) s a side, alternating; medians of the rounds"
      )
      if let only = options.only {
        let script = try writeScript(prefix: "/\(only)/", keys: options.keys, in: directory)
        let figures = try runWrk(
          wrk,
          port: port,
          script: script,
          seconds: options.seconds,
          options: options
        )
        let perSecond = format(figures.perSecond, digits: 0)
        let cpu = format(figures.cpuPerRequest, digits: 1)
        let latency =
          "p50 \(format(figures.p50, digits: 2)) ms, p99 \(format(figures.p99, digits: 2)) ms"
        let switches = format(figures.switchesPerRequest, digits: 2)
        print(
          "\(only): \(perSecond) requests/s, CPU \(cpu) µs and \(switches) context switches "
            + "per request, \(latency)"
        )
        await stop(registry, services, sweeper)
        await observed.shutdown(gracePeriod: .seconds(1))
        guard figures.errors == 0 else { throw BenchmarkError("\(figures.errors) requests failed") }
        return
      }
      // Warm up both sides: every key activated, the pool and the caches settled.
      _ = try runWrk(wrk, port: port, script: actorScript, seconds: 2, options: options)
      _ = try runWrk(wrk, port: port, script: storeScript, seconds: 2, options: options)
      _ = try runWrk(wrk, port: port, script: observedScript, seconds: 2, options: options)

      var stores: [LoadFigures] = []
      var actors: [LoadFigures] = []
      for round in 0..<options.rounds {
        // NB: the side that goes first alternates, so neither always follows the other's load.
        let first = round.isMultiple(of: 2) ? actorScript : storeScript
        let second = round.isMultiple(of: 2) ? storeScript : actorScript
        let one = try runWrk(
          wrk,
          port: port,
          script: first,
          seconds: options.seconds,
          options: options
        )
        let two = try runWrk(
          wrk,
          port: port,
          script: second,
          seconds: options.seconds,
          options: options
        )
        if first == actorScript {
          actors.append(one)
          stores.append(two)
        } else {
          stores.append(one)
          actors.append(two)
        }
      }
      // The observed side against the unobserved one, in rounds of their own, alternating.
      var observedRounds: [LoadFigures] = []
      var unobservedRounds: [LoadFigures] = []
      for round in 0..<options.rounds {
        let observedFirst = round.isMultiple(of: 2)
        let scripts =
          observedFirst ? [observedScript, storeScript] : [storeScript, observedScript]
        let figures = try scripts.map { script in
          try runWrk(wrk, port: port, script: script, seconds: options.seconds, options: options)
        }
        observedRounds.append(observedFirst ? figures[0] : figures[1])
        unobservedRounds.append(observedFirst ? figures[1] : figures[0])
      }
      let errors = (stores + actors + observedRounds + unobservedRounds).reduce(0) {
        $0 + $1.errors
      }
      let throughput = zip(stores, actors).map { $0.perSecond / $1.perSecond }
      let tail = zip(stores, actors).map { $0.p99 / $1.p99 }
      print(
        "case                                         store registry     plain actor        ratio   target"
      )
      let throughputRatio = median(throughput)
      row(
        "session requests/s over HTTP",
        format(median(stores.map(\.perSecond)), digits: 0),
        format(median(actors.map(\.perSecond)), digits: 0),
        format(throughputRatio, digits: 2) + "x",
        "≥0.9x",
        missed: throughputRatio < 0.9
      )
      let tailRatio = median(tail)
      row(
        "session request p50 / p99 ms over HTTP",
        format(median(stores.map(\.p50)), digits: 2) + " / "
          + format(median(stores.map(\.p99)), digits: 2),
        format(median(actors.map(\.p50)), digits: 2) + " / "
          + format(median(actors.map(\.p99)), digits: 2),
        format(tailRatio, digits: 2) + "x",
        "p99 ≤1.3x",
        missed: tailRatio > 1.3
      )
      // The cost of observing: unobserved requests/s over observed, per round (CPU per request
      // on the server beside it).
      let observingCost = median(
        zip(unobservedRounds, observedRounds).map { $0.perSecond / $1.perSecond }
      )
      row(
        "observed session request: cost vs unobserved",
        format(median(observedRounds.map(\.perSecond)), digits: 0) + "/s observed",
        format(median(unobservedRounds.map(\.perSecond)), digits: 0) + "/s",
        format(observingCost, digits: 2) + "x",
        "≤1.15x",
        missed: observingCost > 1.15
      )
      row(
        "observed session request: server CPU µs",
        format(median(observedRounds.map(\.cpuPerRequest)), digits: 1),
        format(median(unobservedRounds.map(\.cpuPerRequest)), digits: 1),
        format(
          median(zip(observedRounds, unobservedRounds).map { $0.cpuPerRequest / $1.cpuPerRequest }),
          digits: 2
        ) + "x",
        "(log, metrics, traces; no-op backends)",
        missed: false
      )
      // Rows with no target: the medians of each side's figure and of the rounds' ratios.
      let untargeted: [(String, KeyPath<LoadFigures, Double>, Int, String)] = [
        ("server CPU per session request, µs", \.cpuPerRequest, 1, "(the server's, not wrk's)"),
        (
          "server context switches per session request", \.switchesPerRequest, 2,
          "(every thread's)"
        ),
      ]
      for (name, figure, digits, note) in untargeted {
        let ratios = zip(stores, actors).map { $0[keyPath: figure] / $1[keyPath: figure] }
        row(
          name,
          format(median(stores.map { $0[keyPath: figure] }), digits: digits),
          format(median(actors.map { $0[keyPath: figure] }), digits: digits),
          format(median(ratios), digits: 2) + "x",
          note,
          missed: false
        )
      }
      print(
        "rounds, store/actor requests/s: "
          + throughput.map { format($0, digits: 2) + "x" }.joined(separator: " ")
          + "; p99: " + tail.map { format($0, digits: 2) + "x" }.joined(separator: " ")
      )
      let misses =
        (throughputRatio < 0.9 ? 1 : 0) + (tailRatio > 1.3 ? 1 : 0) + (observingCost > 1.15 ? 1 : 0)
      print(
        "live sessions: \(registry.liveCount) in the registry; errors: \(errors); misses: \(misses)"
      )
      await stop(registry, services, sweeper)
      await observed.shutdown(gracePeriod: .seconds(1))
      guard errors == 0 else {
        throw BenchmarkError("\(errors) requests failed: the figures above are not comparable")
      }
    }
  }
}

import AsyncHTTPClient
import Foundation
import Hummingbird
import Logging
import NIOCore
import PostgresNIO
import Prometheus
import ServiceLifecycle
import Unidirectional
import UnidirectionalPostgres
import UnidirectionalSQLite
import UnidirectionalServer

/// The carts of a running server: a registry of `Cart` stores, one per customer.
typealias Carts = StoreRegistry<String, Cart>

/// Where carts are kept, from `--storage`.
enum StorageChoice: Sendable, Equatable {
  case memory
  case sqlite(path: String)
  case postgres(PostgresAddress)

  /// Parses `memory`, `sqlite:PATH` or `postgres://USER@HOST:PORT/DB` (``PostgresAddress``).
  init(parsing text: String) throws {
    if text == "memory" {
      self = .memory
    } else if text.hasPrefix("sqlite:") {
      let path = String(text.dropFirst("sqlite:".count))
      guard !path.isEmpty else { throw UsageError("--storage sqlite:PATH needs a path") }
      self = .sqlite(path: path)
    } else if let address = try PostgresAddress(parsing: text) {
      self = .postgres(address)
    } else {
      // NB: the message goes to the log; a password in what was given does not.
      let shown = text.replacingOccurrences(
        of: #"(://[^:/@]*):[^@/]*@"#,
        with: "$1:***@",
        options: .regularExpression
      )
      throw UsageError(
        "--storage takes sqlite:PATH, postgres://USER@HOST:PORT/DB or memory, not '\(shown)'"
      )
    }
  }

  /// A short name for the listening line.
  var kind: String {
    switch self {
    case .memory: "memory"
    case .sqlite(let path): "sqlite:\(path)"
    case .postgres(let address): address.displayed
    }
  }
}

/// A command-line mistake, with what to do instead.
struct UsageError: Error, CustomStringConvertible {
  let description: String
  init(_ description: String) { self.description = description }
}

/// The server's options.
struct ServeOptions: Sendable {
  var host = "127.0.0.1"
  var port = 8080
  var storage = StorageChoice.sqlite(path: "carts.sqlite")
  var owner: String?
  var leaseSeconds = 10
  var idleSeconds = 300
  /// How long a connection may sit without a request before the server closes it.
  ///
  /// A client that dribbles a request's head, or sends none, gives its descriptor back. A
  /// response in progress (a long `/events` stream) is not idle.
  var connectionIdleSeconds = 60.0
  /// The table (SQLite or Postgres) carts are kept in.
  var table = "carts"
  /// The least severe log lines written (`--log-level`, or `LOG_LEVEL`): `debug` during an
  /// incident shows each action and effect of each cart.
  var logLevel = Logger.Level.notice
  /// How the other instances reach this one (default `http://HOST:PORT`; a wildcard HOST
  /// advertises an address of this machine: ``advertisedAddress(port:interfaces:)``).
  var advertise: String?
  /// The most connections this instance opens to PostgreSQL (`--database-connections`).
  ///
  /// Every instance's pool counts against the server's `max_connections` (100 by default, three
  /// kept for superusers), so ten lets nine instances share a default server. Past it the server
  /// refuses new connections, and postgres-nio's pool then queues every request behind its next
  /// attempt instead of lending the connections it holds: six instances of twenty failed half
  /// their requests. One instance serves as much with five connections as with twenty.
  var databaseConnections = 10
  /// Names this run when it listens on any free port (see ``ownerName``).
  let run = UInt32.random(in: 0...UInt32.max)
  init() {}

  /// The owner name leases are taken under: `--owner`, or this machine, address and port.
  ///
  /// A server restarted on its port takes its own leases back at once, and two servers on one
  /// machine are two owners: under one name, each would take every cart from the other and fail
  /// the other's requests (nothing acknowledged is lost: every acquisition fences the one before),
  /// and a read could see the other's older cart. With port 0 (any free port) each run is an owner
  /// of its own.
  var ownerName: String {
    if let owner { return owner }
    let machine = ProcessInfo.processInfo.hostName
    guard self.port != 0 else {
      return "\(machine)/\(self.host):0/\(self.run)"
    }
    return "\(machine)/\(self.host):\(self.port)"
  }
}

/// Opens the storage, runs the server until SIGTERM/SIGINT, then shuts down gracefully: stop
/// accepting, finish what was accepted, save every cart.
///
/// With PostgreSQL, the client runs as a child task of a group around the whole server (a
/// structured pattern, not an unstructured `Task`): it runs before the storage is set up, and is
/// cancelled only once the server's services, the registry's final saves among them, have ended.
func serve(
  _ options: ServeOptions,
  logger: Logger,
  metrics: PrometheusCollectorRegistry? = nil
) async throws {
  let lease = Duration.seconds(options.leaseSeconds)
  switch options.storage {
  case .memory:
    let storage = InMemorySessionStorage<String, Cart.State>(leaseDuration: lease)
    try await serve(options, storage: storage, logger: logger, metrics: metrics)
  case .sqlite(let path):
    let storage = try await SQLiteSessionStorage<String, Cart.State>(
      path: path,
      table: options.table,
      leaseDuration: lease,
      logger: logger
    )
    try await serve(options, storage: storage, logger: logger, metrics: metrics)
  case .postgres(let address):
    // NB: one connection first, before the pool makes any: the pool retries a failed connection
    // quietly (a storage that cannot start would say only that no connection came in time), and
    // the server's free connections are counted without this instance's.
    let check = try await withTimeout(seconds: 10, "PostgreSQL at \(options.storage.kind)") {
      await address.check(logger: logger)
    }
    switch check {
    case .failure(let refused):
      throw UsageError("cannot use PostgreSQL at \(options.storage.kind): \(refused)")
    case .success(let room?) where room.open + options.databaseConnections > room.allowed:
      logger.warning(
        """
        PostgreSQL takes \(room.allowed) connections and \(room.open) are open: this instance's \
        pool of \(options.databaseConnections) may be refused some, which stalls its requests. \
        Lower --database-connections on every instance, or raise max_connections.
        """
      )
    case .success: break
    }
    // NB: postgres-nio says why a connection could not be made at `info`, and only there: a
    // database refusing connections (too many, a certificate, a password) must reach the log.
    var poolLogger = logger
    poolLogger.logLevel = min(logger.logLevel, .info)
    let client = PostgresClient(
      configuration: address.clientConfiguration(maximumConnections: options.databaseConnections),
      backgroundLogger: poolLogger
    )
    try await withThrowingDiscardingTaskGroup { group in
      group.addTask { await client.run() }
      defer { group.cancelAll() }
      let storage: PostgresSessionStorage<String, Cart.State>
      do {
        storage = try await withTimeout(seconds: 10, "PostgreSQL at \(options.storage.kind)") {
          try await PostgresSessionStorage<String, Cart.State>(
            client: client,
            table: options.table,
            leaseDuration: lease,
            logger: logger
          )
        }
      } catch {
        throw UsageError("cannot use PostgreSQL at \(options.storage.kind): \(error)")
      }
      try await serve(options, storage: storage, logger: logger, metrics: metrics)
    }
  }
}

/// Runs the server over `storage` until SIGTERM/SIGINT.
private func serve(
  _ options: ServeOptions,
  storage: any SessionStorage<String, Cart.State>,
  logger: Logger,
  metrics: PrometheusCollectorRegistry?
) async throws {
  let actionMetrics = MetricsObserver<Cart.State, Cart.Action>()
  let carts = Carts(
    storage: storage,
    owner: options.ownerName,
    idleTimeout: .seconds(options.idleSeconds),
    capacity: 100_000,
    observer: { key in
      ObserverGroup<Cart.State, Cart.Action>(
        LoggingObserver(logger: logger, key: key),
        actionMetrics
      )
    },
    // NB: spans go to the bootstrapped tracer (a no-op unless the app installs one); a
    // customer's id is personal data, so it stays out of them.
    registryObserver: SessionObserverGroup(SessionMetrics(), SessionTracing())
  ) { customer in
    Cart.State(customer: customer)
  } reducer: {
    Cart()
  }
  let kind = options.storage.kind
  let host = options.host
  // NB: one client for every forwarded request, its connections to each instance bounded.
  var clientConfiguration = HTTPClient.Configuration()
  clientConfiguration.connectionPool.concurrentHTTP1ConnectionsPerHostSoftLimit = 64
  clientConfiguration.timeout.connect = .seconds(1)
  // NB: the client lets a pooled connection go before the instance at the other end would close
  // it as idle, so a forwarded request is never written to a connection that is closing.
  clientConfiguration.connectionPool.idleTimeout = .nanoseconds(
    Int64(options.connectionIdleSeconds * 500_000_000)
  )
  let forwarding = HTTPClient(
    eventLoopGroupProvider: .singleton,
    configuration: clientConfiguration
  )
  carts.advertisedAddress = options.advertisedAddress(port: options.port)
  let app = Application(
    router: makeRouter(carts: carts, forwarding: forwarding, metrics: metrics),
    server: .http1(
      configuration: .init(
        additionalChannelHandlers: [MalformedRequestHandler()],
        idleTimeout: .nanoseconds(Int64(options.connectionIdleSeconds * 1_000_000_000))
      )
    ),
    configuration: .init(address: .hostname(options.host, port: options.port)),
    services: [carts],
    onServerRunning: { channel in
      let port = channel.localAddress?.port ?? options.port
      let advertised = options.advertisedAddress(port: port)
      carts.advertisedAddress = advertised
      if options.advertise == nil, ServeOptions.isWildcard(host) {
        logger.notice("other instances reach this one at \(advertised) (--advertise sets it)")
      }
      let line = "cart-server listening on \(host):\(port) (storage: \(kind))\n"
      FileHandle.standardOutput.write(Data(line.utf8))
    },
    logger: logger
  )
  do {
    try await app.runService()
  } catch let error as IOError {
    try? await forwarding.shutdown()
    // NB: NIO's text names the system call; an operator needs the address and the reason.
    throw UsageError(
      "cannot listen on \(host):\(options.port): \(String(cString: strerror(error.errnoCode)))"
    )
  } catch {
    try? await forwarding.shutdown()
    throw error
  }
  try await forwarding.shutdown()
}

/// Runs `operation`, failing with a message naming `what` if it takes longer than `seconds`.
func withTimeout<T: Sendable>(
  seconds: Int,
  _ what: String,
  _ operation: @escaping @Sendable () async throws -> T
) async throws -> T {
  try await withThrowingTaskGroup(of: T?.self) { group in
    group.addTask { try await operation() }
    group.addTask {
      try await Task.sleep(for: .seconds(seconds))
      return nil
    }
    defer { group.cancelAll() }
    guard let first = try await group.next(), let value = first else {
      throw UsageError("\(what) did not answer within \(seconds) s")
    }
    return value
  }
}

import Foundation
import Logging
import Metrics
import Prometheus

/// `cart-server [--host H] [--port P] [--storage S] [--owner NAME] [--lease-seconds N]` serves
/// carts; `cart-server load --url U [--clients N] [--seconds T] [--customers C]` drives one.
@main
struct CartServerCommand {
  static func main() async {
    var arguments = Array(CommandLine.arguments.dropFirst())
    do {
      if arguments.contains("--help") || arguments.contains("-h") {
        print("usage: \(Self.usage)")
        exit(0)
      }
      if arguments.first == "load" {
        arguments.removeFirst()
        let options = try parseLoad(arguments)
        let report = try await runLoad(options) { line in
          FileHandle.standardOutput.write(Data((line + "\n").utf8))
        }
        print(report)
        exit(report.lost == 0 ? 0 : 1)
      }
      let options = try parseServe(
        arguments,
        environment: ProcessInfo.processInfo.environment
      )
      LoggingSystem.bootstrap(StreamLogHandler.standardError)
      let metrics = PrometheusCollectorRegistry()
      MetricsSystem.bootstrap(PrometheusMetricsFactory(registry: metrics))
      var logger = Logger(label: "cart-server")
      logger.logLevel = options.logLevel
      try await serve(options, logger: logger, metrics: metrics)
      exit(0)
    } catch {
      FileHandle.standardError.write(Data("cart-server: \(error)\n".utf8))
      exit(2)
    }
  }

  /// The server's options from its arguments; `LOG_LEVEL` in `environment` sets the log level
  /// unless `--log-level` does.
  static func parseServe(
    _ arguments: [String],
    environment: [String: String] = [:]
  ) throws -> ServeOptions {
    var options = ServeOptions()
    if let level = environment["LOG_LEVEL"] {
      options.logLevel = try logLevel(level, "LOG_LEVEL")
    }
    var rest = arguments[...]
    while let flag = rest.popFirst() {
      // NB: the value is taken in each case, so an unknown flag is named as unknown, not as one
      // missing its value.
      func value() throws -> String { try Self.value(of: flag, from: &rest) }
      switch flag {
      case "--host": options.host = try value()
      case "--port": options.port = try number(value(), flag, in: 0...65_535)
      case "--storage": options.storage = try StorageChoice(parsing: value())
      case "--owner": options.owner = try value()
      case "--lease-seconds": options.leaseSeconds = try number(value(), flag, in: 1...86_400)
      case "--idle-seconds": options.idleSeconds = try number(value(), flag, in: 1...31_536_000)
      case "--connection-idle-seconds":
        let text = try value()
        guard let seconds = Double(text), seconds > 0, seconds <= 86_400 else {
          throw UsageError("\(flag) takes a number of seconds above 0, not '\(text)'")
        }
        options.connectionIdleSeconds = seconds
      case "--table": options.table = try value()
      case "--database-connections":
        options.databaseConnections = try number(value(), flag, in: 1...10_000)
      case "--log-level": options.logLevel = try logLevel(value(), flag)
      case "--advertise":
        let text = try value()
        guard let address = httpAddress(text) else {
          throw UsageError("--advertise takes an address like http://10.0.0.7:8080, not '\(text)'")
        }
        options.advertise = address
      default: throw UsageError("unknown option '\(flag)'. Usage: \(Self.usage)")
      }
    }
    return options
  }

  static let usage = """
    cart-server [--host 127.0.0.1] [--port 8080] \
    [--storage sqlite:PATH | postgres://USER@HOST:PORT/DB | memory] [--owner NAME] \
    [--lease-seconds N] [--advertise URL] [--idle-seconds N] [--connection-idle-seconds N] \
    [--table NAME] [--database-connections N] [--log-level LEVEL]; cart-server load --url URL [--url URL ...] \
    [--clients 64] [--seconds 10] [--customers 1000]
    """

  static func parseLoad(_ arguments: [String]) throws -> LoadOptions {
    var options = LoadOptions()
    var urls: [String] = []
    var rest = arguments[...]
    while let flag = rest.popFirst() {
      func value() throws -> String { try Self.value(of: flag, from: &rest) }
      switch flag {
      case "--url":
        let text = try value()
        guard let address = httpAddress(text) else {
          throw UsageError("--url takes an address like http://127.0.0.1:8080, not '\(text)'")
        }
        urls.append(address)
      case "--clients": options.clients = try number(value(), flag, in: 1...10_000)
      case "--seconds": options.seconds = try number(value(), flag, in: 1...86_400)
      case "--customers": options.customers = try number(value(), flag, in: 1...100_000_000)
      default: throw UsageError("unknown load option '\(flag)'. Usage: \(Self.usage)")
      }
    }
    if !urls.isEmpty { options.urls = urls }
    return options
  }

  /// The value after `flag`, taken from `rest`.
  static func value(of flag: String, from rest: inout ArraySlice<String>) throws -> String {
    guard let value = rest.popFirst() else { throw UsageError("\(flag) needs a value") }
    return value
  }

  static func logLevel(_ text: String, _ flag: String) throws -> Logger.Level {
    guard let level = Logger.Level(rawValue: text.lowercased()) else {
      let levels = Logger.Level.allCases.map(\.rawValue).joined(separator: ", ")
      throw UsageError("\(flag) takes one of \(levels), not '\(text)'")
    }
    return level
  }

  /// `text` as an address a request's path is appended to; `nil` if it is not one.
  ///
  /// An instance's address is forwarded to: http or https, a host, a port a socket can take if one
  /// is given, and nothing after it but a slash, which is dropped. `http://10.0.0.7:8080/x` would
  /// forward to `/x/carts/…`, and an address with no host or port 99999 to nowhere.
  static func httpAddress(_ text: String) -> String? {
    guard let url = URL(string: text), let scheme = url.scheme, ["http", "https"].contains(scheme),
      let host = url.host, !host.isEmpty, url.user == nil, url.password == nil,
      url.query == nil, url.fragment == nil, url.path.isEmpty || url.path == "/",
      (url.port.map { (1...65_535).contains($0) } ?? true)
    else { return nil }
    return text.hasSuffix("/") ? String(text.dropLast()) : text
  }

  /// A whole number in `range` (a port a socket can take, a lease the storage can count).
  static func number(_ text: String, _ flag: String, in range: ClosedRange<Int>) throws -> Int {
    guard let value = Int(text), range.contains(value) else {
      throw UsageError(
        "\(flag) takes a whole number from \(range.lowerBound) to \(range.upperBound), not '\(text)'"
      )
    }
    return value
  }
}

import Foundation
import Logging
import NIOSSL
import PostgresNIO

/// A PostgreSQL server to keep carts in, from `--storage postgres://USER[:PASSWORD]@HOST:PORT/DB`.
///
/// The URL is libpq's: a password in it, else `PGPASSWORD`'s, and the query parameters `sslmode`
/// (`disable`, `prefer` (the default), `require`, `verify-ca`, `verify-full`), `sslrootcert` (the
/// certificates to verify the server's against; with `require`, verification as `verify-ca`, as
/// libpq does) and `application_name`. Any other parameter is refused by name: one ignored could be
/// a misspelt `sslmode`, and the connection would be weaker than asked for without a word.
struct PostgresAddress: Sendable, Equatable {
  /// How the connection uses TLS (libpq's `sslmode`).
  enum TLSMode: String, Sendable, Equatable, CaseIterable {
    case disable
    case prefer
    case require
    case verifyCA = "verify-ca"
    case verifyFull = "verify-full"
  }

  var host: String
  var port = 5432
  var user: String
  var password: String?
  var database: String
  var tls = TLSMode.prefer
  /// A file of PEM certificates the server's must chain to (`sslrootcert`).
  var rootCertificates: String?
  var applicationName: String?
}

extension PostgresAddress {
  /// Parses a `postgres://` or `postgresql://` URL; `nil` if `text` is not one.
  init?(parsing text: String) throws {
    guard let url = URLComponents(string: text),
      url.scheme == "postgres" || url.scheme == "postgresql",
      let host = url.host, !host.isEmpty, let user = url.user, !user.isEmpty
    else { return nil }
    // NB: `URLComponents` keeps an IPv6 literal's brackets, which no resolver takes.
    self.host =
      host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
    self.port = url.port ?? 5432
    // NB: `URLComponents` hands the user information over percent-decoded.
    self.user = user
    self.password = url.password
    let path = url.path.hasPrefix("/") ? String(url.path.dropFirst()) : url.path
    self.database = path.isEmpty ? user : path
    for item in url.queryItems ?? [] {
      let value = item.value ?? ""
      switch item.name {
      case "sslmode":
        guard let mode = TLSMode(rawValue: value) else {
          let modes = TLSMode.allCases.map(\.rawValue).joined(separator: ", ")
          throw UsageError("--storage's sslmode takes one of \(modes), not '\(value)'")
        }
        self.tls = mode
      case "sslrootcert":
        guard FileManager.default.isReadableFile(atPath: value) else {
          throw UsageError("--storage's sslrootcert '\(value)' is not a file this process can read")
        }
        self.rootCertificates = value
      case "application_name": self.applicationName = value
      default:
        throw UsageError(
          """
          --storage's URL has a parameter '\(item.name)' that cart-server does not take (it takes \
          sslmode, sslrootcert and application_name)
          """
        )
      }
    }
  }

  /// The address as the listening line and the logs show it: never the password.
  var displayed: String {
    let mode = self.tls == .prefer ? "" : "?sslmode=\(self.tls.rawValue)"
    let host = self.host.contains(":") ? "[\(self.host)]" : self.host
    return "postgres://\(self.user)@\(host):\(self.port)/\(self.database)\(mode)"
  }

  /// The client's configuration, with at most `maximumConnections` connections.
  func clientConfiguration(
    maximumConnections: Int,
    environment: [String: String] = ProcessInfo.processInfo.environment
  ) -> PostgresClient.Configuration {
    var configuration = PostgresClient.Configuration(
      host: self.host,
      port: self.port,
      username: self.user,
      password: self.password(in: environment),
      database: self.database,
      tls: self.tlsConfiguration
    )
    configuration.options.maximumConnections = maximumConnections
    if let name = self.applicationName {
      configuration.options.additionalStartupParameters = [("application_name", name)]
    }
    return configuration
  }

  /// The password: the URL's, else libpq's environment variable's.
  private func password(in environment: [String: String]) -> String? {
    self.password ?? environment["PGPASSWORD"]
  }

  /// What one connection to this address finds: why it was refused, or how many connections the
  /// server takes (`max_connections` less those kept for superusers) and how many are open.
  func check(logger: Logger) async -> Result<(allowed: Int, open: Int)?, ConnectionRefused> {
    do {
      let tls: PostgresConnection.Configuration.TLS
      switch (self.tls, self.tlsSettings) {
      case (.disable, _), (_, nil): tls = .disable
      case (.prefer, let settings?): tls = .prefer(try NIOSSLContext(configuration: settings))
      case (_, let settings?): tls = .require(try NIOSSLContext(configuration: settings))
      }
      let connection = try await PostgresConnection.connect(
        configuration: .init(
          host: self.host,
          port: self.port,
          username: self.user,
          password: self.password(in: ProcessInfo.processInfo.environment),
          database: self.database,
          tls: tls
        ),
        id: 0,
        logger: logger
      )
      let rows = try? await connection.query(
        """
        SELECT current_setting('max_connections')::int
          - current_setting('superuser_reserved_connections')::int,
          (SELECT count(*)::int FROM pg_stat_activity WHERE backend_type = 'client backend')
        """,
        logger: logger
      ).collect()
      try? await connection.close()
      return .success(try? rows?.first?.decode((Int, Int).self))
    } catch let error as PSQLError {
      if error.code == .sslUnsupported {
        return .failure(
          ConnectionRefused(
            "the server does not take TLS, which sslmode=\(self.tls.rawValue) requires"
          )
        )
      }
      if let message = error.serverInfo?[.message] {
        let state = error.serverInfo?[.sqlState] ?? "?"
        return .failure(ConnectionRefused("\(message) (SQLSTATE \(state))"))
      }
      return .failure(
        ConnectionRefused(error.underlying.map { "\($0)" } ?? String(reflecting: error))
      )
    } catch {
      return .failure(ConnectionRefused(String(reflecting: error)))
    }
  }

  /// Why a connection was refused.
  struct ConnectionRefused: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
  }

  /// The TLS settings of every mode but `disable`.
  private var tlsSettings: TLSConfiguration? {
    var tls = TLSConfiguration.makeClientConfiguration()
    if let roots = self.rootCertificates { tls.trustRoots = .file(roots) }
    switch self.tls {
    case .disable: return nil
    case .prefer: tls.certificateVerification = .none
    case .require:
      tls.certificateVerification = self.rootCertificates == nil ? .none : .noHostnameVerification
    case .verifyCA: tls.certificateVerification = .noHostnameVerification
    case .verifyFull: tls.certificateVerification = .fullVerification
    }
    return tls
  }

  private var tlsConfiguration: PostgresClient.Configuration.TLS {
    switch (self.tls, self.tlsSettings) {
    case (.disable, _), (_, nil): .disable
    case (.prefer, let settings?): .prefer(settings)
    case (_, let settings?): .require(settings)
    }
  }
}

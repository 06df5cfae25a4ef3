import NIOCore
import Testing

@testable import CartServer

/// `cart-server`'s options: good ones parsed, bad ones refused with a message naming the flag.
@Suite struct CommandLineTests {
  @Test func serveOptionsAreParsedWithTheirDefaults() throws {
    let defaults = try CartServerCommand.parseServe([])
    #expect(defaults.port == 8080)
    #expect(defaults.advertise == nil)
    #expect(defaults.connectionIdleSeconds == 60)
    let options = try CartServerCommand.parseServe([
      "--port", "9000", "--owner", "node-a", "--advertise", "http://10.0.0.7:9000",
      "--storage", "postgres://me@127.0.0.1:5432/carts", "--connection-idle-seconds", "2.5",
    ])
    #expect(options.connectionIdleSeconds == 2.5)
    #expect(options.port == 9000)
    #expect(options.owner == "node-a")
    #expect(options.ownerName == "node-a")
    #expect(options.advertise == "http://10.0.0.7:9000")
    // A trailing slash is dropped, and an address with no port or over IPv6 is taken.
    for (given, kept) in [
      ("http://10.0.0.7:9000/", "http://10.0.0.7:9000"),
      ("https://carts.internal", "https://carts.internal"),
      ("http://[::1]:9000", "http://[::1]:9000"),
    ] {
      #expect(try CartServerCommand.parseServe(["--advertise", given]).advertise == kept)
    }
    #expect(
      options.storage
        == .postgres(PostgresAddress(host: "127.0.0.1", user: "me", database: "carts"))
    )
    #expect(defaults.databaseConnections == 10)
    #expect(
      try CartServerCommand.parseServe(["--database-connections", "4"]).databaseConnections == 4
    )
  }

  @Test func aPasswordInThePostgresURLIsUsedAndNeverPrinted() throws {
    let options = try CartServerCommand.parseServe([
      "--storage", "postgres://me:s%40cret@db.internal:6432/carts",
    ])
    let address = PostgresAddress(
      host: "db.internal",
      port: 6432,
      user: "me",
      password: "s@cret",
      database: "carts"
    )
    #expect(options.storage == .postgres(address))
    // The listening line and the logs name the database by this: no password in it.
    #expect(options.storage.kind == "postgres://me@db.internal:6432/carts")
    // Nor does the message that refuses an address with no host.
    let refused = #expect(throws: UsageError.self) {
      try CartServerCommand.parseServe(["--storage", "postgres://me:s3cret@/carts"])
    }
    #expect(refused?.description.contains("postgres://me:***@/carts") == true)
    #expect(refused?.description.contains("s3cret") == false)
    // With none in the URL, libpq's environment variable is used.
    let bare = try #require(try PostgresAddress(parsing: "postgres://me@db.internal/carts"))
    let environment = ["PGPASSWORD": "from-env"]
    #expect(
      bare.clientConfiguration(maximumConnections: 3, environment: environment).password
        == "from-env"
    )
    #expect(bare.clientConfiguration(maximumConnections: 3, environment: [:]).password == nil)
    #expect(
      address.clientConfiguration(maximumConnections: 3, environment: environment).password
        == "s@cret"
    )
  }

  @Test func thePostgresURLTakesLibpqsTLSParametersAndRefusesOthersByName() throws {
    func address(_ query: String) throws -> PostgresAddress? {
      try PostgresAddress(parsing: "postgres://me@db.internal:5432/carts\(query)")
    }
    #expect(try address("")?.tls == .prefer)
    #expect(try address("?sslmode=disable")?.tls == .disable)
    #expect(try address("?sslmode=require")?.tls == .require)
    #expect(try address("?sslmode=verify-ca")?.tls == .verifyCA)
    let full = try address("?sslmode=verify-full&sslrootcert=/dev/null&application_name=carts")
    #expect(full?.tls == .verifyFull)
    #expect(full?.rootCertificates == "/dev/null")
    #expect(full?.applicationName == "carts")
    #expect(full?.displayed == "postgres://me@db.internal:5432/carts?sslmode=verify-full")
    #expect(
      full?.clientConfiguration(maximumConnections: 3).options.additionalStartupParameters.first?.1
        == "carts"
    )
    let refused: [(String, String)] = [
      ("?sslmode=verify", "sslmode takes one of disable, prefer, require, verify-ca, verify-full"),
      ("?ssl_mode=require", "parameter 'ssl_mode'"),
      ("?sslrootcert=/no/such/file", "sslrootcert '/no/such/file'"),
    ]
    for (query, message) in refused {
      let error = #expect(throws: UsageError.self, "\(query)") { try address(query) }
      #expect(error?.description.contains(message) == true, "\(String(describing: error))")
    }
    #expect(try PostgresAddress(parsing: "postgres://db.internal/carts") == nil)
    // An IPv6 literal goes to the resolver without its brackets; the default port and database.
    let six = try PostgresAddress(parsing: "postgresql://me@[::1]")
    #expect(six == PostgresAddress(host: "::1", user: "me", database: "me"))
    #expect(six?.displayed == "postgres://me@[::1]:5432/me")
  }

  @Test func theLogLevelComesFromItsFlagOrTheEnvironment() throws {
    #expect(try CartServerCommand.parseServe([]).logLevel == .notice)
    #expect(try CartServerCommand.parseServe(["--log-level", "debug"]).logLevel == .debug)
    let environment = ["LOG_LEVEL": "TRACE"]
    #expect(try CartServerCommand.parseServe([], environment: environment).logLevel == .trace)
    let both = try CartServerCommand.parseServe(["--log-level", "error"], environment: environment)
    #expect(both.logLevel == .error)
    for (arguments, environment) in [(["--log-level", "loud"], [:]), ([], ["LOG_LEVEL": ""])] {
      let error = #expect(throws: UsageError.self) {
        _ = try CartServerCommand.parseServe(arguments, environment: environment)
      }
      #expect(error?.description.contains("trace, debug, info") == true)
    }
  }

  @Test func aWildcardHostAdvertisesAnAddressOfThisMachineNeverTheWildcard() throws {
    func addresses(_ ips: String...) throws -> [SocketAddress] {
      try ips.map { try SocketAddress(ipAddress: $0, port: 0) }
    }
    let machine = try addresses("127.0.0.1", "::1", "fe80::1", "2001:db8::7", "10.0.0.7")
    for host in ["0.0.0.0", "::", "[::]"] {
      let options = try CartServerCommand.parseServe(["--host", host])
      // IPv4 first: a dual-stack wildcard takes it, and it needs no interface named.
      #expect(options.advertisedAddress(port: 8080) { machine } == "http://10.0.0.7:8080")
      #expect(
        options.advertisedAddress(port: 8080) {
          try! addresses("127.0.0.1", "fe80::1", "2001:db8::7")
        }
          == "http://[2001:db8::7]:8080"
      )
      // Loopback alone: the instances can only be on this machine, and reach it so.
      #expect(
        options.advertisedAddress(port: 9) { try! addresses("127.0.0.1", "::1") }
          == "http://127.0.0.1:9"
      )
      #expect(options.advertisedAddress(port: 9) { [] } == "http://127.0.0.1:9")
    }
    // Any other host is advertised as given (an IPv6 literal in brackets), and --advertise wins.
    let named = try CartServerCommand.parseServe(["--host", "carts-1.internal"])
    #expect(named.advertisedAddress(port: 80) { machine } == "http://carts-1.internal:80")
    let ipv6 = try CartServerCommand.parseServe(["--host", "::1"])
    #expect(ipv6.advertisedAddress(port: 80) { machine } == "http://[::1]:80")
    let given = try CartServerCommand.parseServe([
      "--host", "0.0.0.0", "--advertise", "http://lb:1",
    ])
    #expect(given.advertisedAddress(port: 80) { machine } == "http://lb:1")
    // This machine's own list has no wildcard and no loopback in what it picks.
    let picked = ServeOptions.reachableAddress(among: ServeOptions.interfaces())
    #expect(!ServeOptions.isWildcard(picked))
    #expect(picked == "127.0.0.1" || !(picked.hasPrefix("127.") || picked == "::1"))
  }

  @Test func withNoOwnerGivenTwoServersOnOneMachineAreTwoOwnersAndARestartIsTheSame() throws {
    let a = try CartServerCommand.parseServe(["--port", "9001"])
    let b = try CartServerCommand.parseServe(["--port", "9002"])
    let other = try CartServerCommand.parseServe(["--host", "127.0.0.2", "--port", "9001"])
    #expect(Set([a.ownerName, b.ownerName, other.ownerName]).count == 3)
    // Restarted on its port, a server is the same owner: it takes its leases back at once.
    #expect(try CartServerCommand.parseServe(["--port", "9001"]).ownerName == a.ownerName)
    // On any free port, each run is an owner of its own.
    let anyPort = try CartServerCommand.parseServe(["--port", "0"])
    #expect(anyPort.ownerName == anyPort.ownerName)
    #expect(try CartServerCommand.parseServe(["--port", "0"]).ownerName != anyPort.ownerName)
  }

  @Test func badServeOptionsAreRefusedNamingTheFlag() {
    let cases: [([String], String)] = [
      (["--advertise", "not a url"], "--advertise"),
      (["--advertise", "ftp://10.0.0.7:9000"], "--advertise"),
      (["--advertise", "http://"], "--advertise"),
      // Each of these started a server that no other instance could forward to: the address is
      // the start of every forwarded request's URL.
      (["--advertise", "http://:9000"], "--advertise"),
      (["--advertise", "http://10.0.0.7:99999"], "--advertise"),
      (["--advertise", "http://10.0.0.7:0"], "--advertise"),
      (["--advertise", "http://10.0.0.7:9000/prefix"], "--advertise"),
      (["--advertise", "http://10.0.0.7:9000?x=1"], "--advertise"),
      (["--advertise", "http://10.0.0.7:9000#top"], "--advertise"),
      (["--advertise", "http://user@10.0.0.7:9000"], "--advertise"),
      (["--port", "-1"], "--port"),
      (["--port", "eighty"], "--port"),
      // Each of these trapped, spun or listened elsewhere: a port a socket cannot take (70000
      // listened on 4464), a lease of 0 (renewals in a loop with no pause), an idle timeout of 0
      // or one past what a timer can count.
      (["--port", "70000"], "--port"),
      (["--lease-seconds", "0"], "--lease-seconds"),
      (["--lease-seconds", "9223372036854775807"], "--lease-seconds"),
      (["--idle-seconds", "0"], "--idle-seconds"),
      (["--idle-seconds", "9223372036854775807"], "--idle-seconds"),
      (["--storage", "mysql://x"], "--storage"),
      (["--storage", "sqlite:"], "--storage"),
      (["--port"], "--port"),
      (["--bogus", "1"], "--bogus"),
      // An unknown flag is named as one, with or without a value after it (this said "--bogus
      // needs a value", and a stray word "extra needs a value").
      (["--bogus"], "unknown option '--bogus'"),
      (["extra"], "unknown option 'extra'"),
      (["--port", "8080", "--prot", "9"], "unknown option '--prot'"),
      (["--connection-idle-seconds", "0"], "--connection-idle-seconds"),
      (["--connection-idle-seconds", "nan"], "--connection-idle-seconds"),
      (["--connection-idle-seconds", "inf"], "--connection-idle-seconds"),
      (["--connection-idle-seconds", "-3"], "--connection-idle-seconds"),
      (["--database-connections", "0"], "--database-connections"),
      (["--database-connections", "many"], "--database-connections"),
    ]
    for (arguments, flag) in cases {
      let error = #expect(throws: UsageError.self, "\(arguments)") {
        try CartServerCommand.parseServe(arguments)
      }
      #expect(
        error?.description.contains(flag) == true,
        "\(arguments): \(String(describing: error))"
      )
    }
  }

  @Test func loadSpreadsOverEveryURLGivenAndRefusesBadOnes() throws {
    let one = try CartServerCommand.parseLoad([])
    #expect(one.urls == ["http://127.0.0.1:8080"])
    let many = try CartServerCommand.parseLoad([
      "--url", "http://127.0.0.1:8001", "--url", "http://127.0.0.1:8002", "--clients", "4",
    ])
    #expect(many.urls == ["http://127.0.0.1:8001", "http://127.0.0.1:8002"])
    #expect(many.clients == 4)
    let bad = [
      ["--url", "nowhere"], ["--url", "http://:8080"], ["--url", "http://127.0.0.1:8080/x"],
      ["--clients", "0"], ["--seconds", "x"], ["--url"],
      ["--clients", "10000000"], ["--customers", "0"], ["--seconds", "99999999999"],
    ]
    for arguments in bad {
      #expect(throws: UsageError.self, "\(arguments)") {
        try CartServerCommand.parseLoad(arguments)
      }
    }
    let unknown = #expect(throws: UsageError.self) { try CartServerCommand.parseLoad(["--client"]) }
    #expect(unknown?.description.hasPrefix("unknown load option '--client'") == true)
  }
}

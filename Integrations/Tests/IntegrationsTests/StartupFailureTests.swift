import Foundation
import Testing

@testable import CartServer

/// A server that cannot start says why, naming what it could not use, and exits 2.
@Suite(
  .timeLimit(.minutes(1)),
  .enabled(if: cartServerBinary != nil, "the cart-server binary is not built next to the tests")
)
struct StartupFailureTests {
  @Test func aPortAlreadyTakenIsNamedWithTheReason() async throws {
    let first = try await CartServerProcess(["--storage", "memory"])
    let (status, message) = try await runCartServer([
      "--host", "127.0.0.1", "--port", "\(first.port)", "--storage", "memory",
    ])
    #expect(status == 2)
    #expect(
      message == "cart-server: cannot listen on 127.0.0.1:\(first.port): Address already in use\n"
    )
    #expect(await first.stop(SIGTERM) == 0)
  }

  @Test func aFileThatIsNotADatabaseIsNamed() async throws {
    let directory = try temporaryDirectory()
    defer { try? FileManager.default.removeItem(at: directory) }
    let path = directory.appendingPathComponent("carts.sqlite").path
    try Data("SQLite format 3\0 and then not a database".utf8).write(to: URL(fileURLWithPath: path))
    let (status, message) = try await runCartServer([
      "--host", "127.0.0.1", "--port", "0", "--storage", "sqlite:\(path)",
    ])
    #expect(status == 2)
    #expect(message.hasPrefix("cart-server: cannot open the SQLite database at '\(path)'"))
    #expect(message.contains("file is not a database"))
  }

  @Test(.enabled(if: postgresURL != nil, "POSTGRES_URL is not set: no PostgreSQL to test against"))
  func aPostgreSQLThatRefusesTheConnectionIsNamedWithItsReason() async throws {
    // The pool retries a refused connection quietly: this said only that no connection was
    // ready within 5 s, after waiting them, whatever the reason.
    var address = URLComponents(url: postgresURL!, resolvingAgainstBaseURL: false)!
    address.path = "/no_such_database"
    let (status, message) = try await runCartServer(["--port", "0", "--storage", address.string!])
    #expect(status == 2)
    #expect(
      message.hasSuffix(
        "/no_such_database: database \"no_such_database\" does not exist (SQLSTATE 3D000)\n"
      ),
      "\(message)"
    )
    #expect(message.hasPrefix("cart-server: cannot use PostgreSQL at postgres://"))
  }

  @Test func helpPrintsTheUsageAndStartsNothing() async throws {
    for flag in ["--help", "-h"] {
      let (status, message) = try await runCartServer(["--port", "1", flag], output: true)
      #expect(status == 0)
      #expect(message.hasPrefix("usage: cart-server [--host 127.0.0.1] [--port 8080]"))
    }
  }
}

/// Runs `cart-server` with `arguments` until it exits; its status and what it wrote to stderr
/// (to stdout, with `output`).
func runCartServer(_ arguments: [String], output: Bool = false) async throws -> (Int32, String) {
  guard let binary = cartServerBinary else { throw LoadError("cart-server is not built") }
  let process = Process()
  process.executableURL = binary
  process.arguments = arguments
  let errors = Pipe()
  process.standardError = output ? FileHandle.nullDevice : errors
  process.standardOutput = output ? errors : FileHandle.nullDevice
  try process.run()
  return await offThePool {
    let message = errors.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    return (process.terminationStatus, String(decoding: message, as: UTF8.self))
  }
}

import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Runs the examples as real processes.
@Suite(.serialized, .timeLimit(.minutes(2))) struct CommandLineTests {
  /// The directory holding the built executables (next to the test bundle).
  private static var productsDirectory: URL {
    URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
  }

  private struct Finished {
    var status: Int32
    var output: String
    var error: String
  }

  private static func run(
    _ name: String,
    _ arguments: [String],
    input: Data? = nil
  ) throws -> Finished {
    let process = Process()
    process.executableURL = Self.productsDirectory.appendingPathComponent(name)
    process.arguments = arguments
    let output = Pipe()
    let error = Pipe()
    let stdin = Pipe()
    process.standardOutput = output
    process.standardError = error
    process.standardInput = stdin
    try process.run()
    if let input { stdin.fileHandleForWriting.write(input) }
    try stdin.fileHandleForWriting.close()
    let out = output.fileHandleForReading.readDataToEndOfFile()
    let err = error.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    return Finished(
      status: process.terminationStatus,
      output: String(decoding: out, as: UTF8.self),
      error: String(decoding: err, as: UTF8.self)
    )
  }

  @Test(arguments: ["-5", "abc", "99999999", "0"])
  func nthPrimeRejectsABadArgumentWithExitCode2(argument: String) throws {
    let result = try Self.run("nth-prime", [argument])
    #expect(result.status == 2)
    #expect(
      result.error
        == "error: N must be a whole number from 1 to 5,000,000 (got '\(argument)'); see --help\n"
    )
  }

  @Test func nthPrimeFindsThePrime() throws {
    let result = try Self.run("nth-prime", ["200"])
    #expect(result.status == 0)
    #expect(result.output.hasSuffix("The 200th prime is 1223.\n"))
  }

  @Test func nthPrimePrintsHelp() throws {
    let result = try Self.run("nth-prime", ["--help"])
    #expect(result.status == 0)
    #expect(result.output.contains("usage: nth-prime [N]"))
  }

  @Test func ctrlCCancelsTheComputationAndExits130() throws {
    let process = Process()
    process.executableURL = Self.productsDirectory.appendingPathComponent("nth-prime")
    process.arguments = ["5000000"]
    let output = Pipe()
    process.standardOutput = output
    try process.run()
    // Wait for the first progress line: the effect is running. No sleeping: this blocks on the
    // pipe until the program writes.
    var seen = ""
    while !seen.contains("progress") {
      let data = output.fileHandleForReading.availableData
      if data.isEmpty { break }
      seen += String(decoding: data, as: UTF8.self)
    }
    kill(process.processIdentifier, SIGINT)
    seen += String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    process.waitUntilExit()
    #expect(process.terminationStatus == 130)
    #expect(seen.contains("Stopped after checking"))
  }

  @Test func effectsBasicsFollowsPipedCommands() throws {
    let result = try Self.run("effects-basics", [], input: Data("+\n+\n-\nnope\nquit\n".utf8))
    #expect(result.status == 0)
    // The state printer reads `store.states`, which skips to the latest state when it falls
    // behind: only the last state is certain to be printed.
    let stateLines = result.output.split(separator: "\n").filter { $0.hasPrefix("count: ") }
    #expect(stateLines.last == "count: 1")
    #expect(result.output.contains("unknown command 'nope'; type 'help' for the list"))
    #expect(result.output.hasSuffix("bye\n"))
  }

  @Test func effectsBasicsSurvivesRandomBytes() throws {
    var generator = SystemRandomNumberGenerator()
    let bytes = (0..<4_096).map { _ in UInt8.random(in: 0...255, using: &generator) }
    let result = try Self.run("effects-basics", [], input: Data(bytes))
    #expect(result.status == 0)
    #expect(result.output.hasSuffix("bye\n"))
  }
}

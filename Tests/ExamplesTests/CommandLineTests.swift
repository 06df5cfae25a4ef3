import ExampleFeatures
import Foundation
import Testing

@testable import LineServerCore

#if canImport(Glibc)
import Glibc
#endif

/// Runs the examples as real processes.
@Suite(.serialized, .timeLimit(.minutes(2))) struct CommandLineTests {
  /// The directory holding the built executables (next to the test bundle).
  private static var productsDirectory: URL {
    URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
  }

  @Test(arguments: ["-5", "abc", "99999999", "0"])
  func nthPrimeRejectsABadArgumentWithExitCode2(argument: String) async throws {
    let result = try await runExample("nth-prime", [argument])
    #expect(result.status == 2)
    #expect(
      result.error
        == "error: N must be a whole number from 1 to 5,000,000 (got '\(argument)'); see --help\n"
    )
  }

  @Test func nthPrimeFindsThePrime() async throws {
    let result = try await runExample("nth-prime", ["200"])
    #expect(result.status == 0)
    #expect(result.output.hasSuffix("The 200th prime is 1223.\n"))
  }

  @Test func nthPrimePrintsHelp() async throws {
    let result = try await runExample("nth-prime", ["--help"])
    #expect(result.status == 0)
    #expect(result.output.contains("usage: nth-prime [N]"))
  }

  @Test func ctrlCCancelsTheComputationAndExits130() async throws {
    let executable = Self.productsDirectory.appendingPathComponent("nth-prime")
    let (status, seen) = try await offThePool { () throws -> (Int32, String) in
      let process = Process()
      process.executableURL = executable
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
      return (process.terminationStatus, seen)
    }
    #expect(status == 130)
    #expect(seen.contains("Stopped after checking"))
  }

  /// The README's transcript: piped commands are echoed and print the same on every run.
  @Test func effectsBasicsFollowsPipedCommandsTheSameWayEveryTime() async throws {
    let input = Data("+\n-\n-\nnope\nquit\n".utf8)
    let expected = """
      effects-basics: type 'help' for commands
      count: 0
      > +
      count: 1
      > -
      count: 0
      > -
      count: -1
      > nope
      unknown command 'nope'; type 'help' for the list
      > quit
      bye

      """
    for _ in 0..<5 {
      let result = try await runExample("effects-basics", [], input: input)
      #expect(result.status == 0)
      #expect(result.output == expected)
    }
  }

  @Test func effectsBasicsLetsComputationsFinishBeforeTheNextPipedCommand() async throws {
    let result = try await runExample("effects-basics", [], input: Data("prime\n+\nfact\n".utf8))
    #expect(result.status == 0)
    #expect(
      result.output.hasSuffix(
        """
        > prime
        count: 0 | prime: 0%
        count: 0 | fact: The 1st prime is 2.
        > +
        count: 1 | fact: The 1st prime is 2.
        > fact
        count: 1
        count: 1 | fact: 1 is odd, a perfect square (1²), has a digit sum of 1.
        bye

        """
      )
    )
  }

  @Test func effectsBasicsRefusesAnOverlongLineWithoutBufferingIt() async throws {
    var input = Data(repeating: UInt8(ascii: "a"), count: 5_000_000)
    input.append(contentsOf: Array("\n+\nquit\n".utf8))
    let result = try await runExample("effects-basics", [], input: input)
    #expect(result.status == 0)
    #expect(
      result.output.contains("error: a line longer than 1024 bytes was ignored\n> +\ncount: 1\n")
    )
  }

  /// Typed on a terminal, the input stays open between commands: each command's output must
  /// appear without waiting for the next line (it once froze until another line was typed).
  @Test func effectsBasicsAnswersEachLineWhileTheInputStaysOpen() async throws {
    let executable = Self.productsDirectory.appendingPathComponent("effects-basics")
    let (status, seen) = try await offThePool { () throws -> (Int32, String) in
      let process = Process()
      process.executableURL = executable
      let output = Pipe()
      let input = Pipe()
      process.standardOutput = output
      process.standardInput = input
      try process.run()
      var seen = ""
      func readUntil(_ text: String) {
        // NB: blocks on the pipe until the program writes; no sleeping, no polling.
        while !seen.contains(text) {
          let data = output.fileHandleForReading.availableData
          if data.isEmpty { return }
          seen += String(decoding: data, as: UTF8.self)
        }
      }
      readUntil("count: 0\n")
      input.fileHandleForWriting.write(Data("help\n".utf8))
      readUntil("quit    exit at once")
      input.fileHandleForWriting.write(Data("timer\n".utf8))
      readUntil("count: 1 | timer: on")  // the first tick, a second later, with no more input
      input.fileHandleForWriting.write(Data("stop\nquit\n".utf8))
      readUntil("bye\n")
      try input.fileHandleForWriting.close()
      process.waitUntilExit()
      return (process.terminationStatus, seen)
    }
    #expect(seen.contains("commands (one per line):"))
    #expect(seen.contains("count: 1 | timer: on"))
    #expect(status == 0)
    #expect(seen.hasSuffix("> stop\ncount: 1\n> quit\nbye\n"))
  }

  @Test func theReadmeProgramPrintsWhatItsCommentsSay() async throws {
    let result = try await runExample("readme-example", [])
    #expect(result.status == 0)
    #expect(result.output == "count: -1\ncount: 0\n")
  }

  @Test func effectsBasicsQuitsWithLinesLeftUnreadAndSaysBye() async throws {
    // The reader thread framed every line and ended before `quit` was read: the credits the
    // unread lines took were never given back when the semaphore holding them went.
    let input = "q\n" + String(repeating: "+\n", count: 10)
    let result = try await runExample("effects-basics", [], input: Data(input.utf8))
    #expect(result.status == 0, "\(result.error)")
    #expect(result.output.hasSuffix("> q\nbye\n"))
  }

  @Test func creditsMayGoWithCreditsStillTaken() {
    // A consumer that stops early (a quit, a server's shutdown) leaves credits taken.
    let credits = creditSemaphore(64)
    for _ in 0..<10 { credits.wait() }
    for _ in 0..<3 { credits.signal() }
  }

  @Test func effectsBasicsSurvivesRandomBytes() async throws {
    var generator = SystemRandomNumberGenerator()
    let bytes = (0..<4_096).map { _ in UInt8.random(in: 0...255, using: &generator) }
    let result = try await runExample("effects-basics", [], input: Data(bytes))
    #expect(result.status == 0)
    #expect(result.output.hasSuffix("bye\n"))
  }
}

extension CommandLineTests {
  @Test func theLineServerServesOnWithMoreClientsThanItHasDescriptors() async throws {
    let executable = URL(fileURLWithPath: CommandLine.arguments[0])
      .deletingLastPathComponent().appendingPathComponent("line-server")
    let (first, later, status) = try await offThePool { () throws -> (String, String, Int32) in
      let process = Process()
      process.executableURL = URL(fileURLWithPath: "/bin/sh")
      process.arguments = ["-c", #"ulimit -n 48 && exec "$0" serve --port 0"#, executable.path]
      // NB: under AddressSanitizer, no leak check at exit: the server is interrupted while it
      // still sets up connections of the crowd from its backlog, and exits holding them.
      var environment = ProcessInfo.processInfo.environment
      environment["ASAN_OPTIONS"] =
        (environment["ASAN_OPTIONS"].map { $0 + ":" } ?? "")
        + "detect_leaks=0"
      process.environment = environment
      let output = Pipe()
      process.standardOutput = output
      process.standardError = FileHandle.nullDevice
      try process.run()
      let listening = readLine(from: output, containing: "listening on")
      guard let range = listening.range(of: #"127\.0\.0\.1:\d+"#, options: .regularExpression),
        let port = UInt16(listening[range].split(separator: ":").last ?? "")
      else {
        process.terminate()
        throw ExampleError("line-server did not start: '\(listening)'")
      }
      // Five times the clients the server may hold with 48 descriptors: it takes the first and
      // keeps the rest waiting. (It used to accept until it ran out, then stop accepting for good,
      // or crash in libdispatch, which opens a file every second.)
      var crowd = try (0..<80).map { _ in try Socket.connect(port: port) }
      let first = exchange("inc", on: crowd[0])
      crowd.removeAll()  // a socket closes as it goes
      let later = exchange("inc", on: try Socket.connect(port: port))
      process.interrupt()
      process.waitUntilExit()
      return (first, later, process.terminationStatus)
    }
    #expect(first == "1\n")
    #expect(later == "1\n")
    #expect(status == 0)
  }
}

extension CommandLineTests {
  @Test func aLoadPastTheDescriptorLimitIsRefusedSayingSo() async throws {
    let executable = URL(fileURLWithPath: CommandLine.arguments[0])
      .deletingLastPathComponent().appendingPathComponent("line-server")
    let (status, error) = try await offThePool { () throws -> (Int32, String) in
      let process = Process()
      process.executableURL = URL(fileURLWithPath: "/bin/sh")
      process.arguments = [
        "-c", #"ulimit -n 100 && exec "$0" load --clients 200 --commands 10"#, executable.path,
      ]
      let errors = Pipe()
      process.standardOutput = FileHandle.nullDevice
      process.standardError = errors
      try process.run()
      let text = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
      process.waitUntilExit()
      return (process.terminationStatus, text)
    }
    #expect(status == 1)
    #expect(error.contains("clients need") && error.contains("raise ulimit -n"), "\(error)")
  }
}

/// Sends `command` on `socket` and reads the reply (empty if the connection ended).
private func exchange(_ command: String, on socket: Socket) -> String {
  socket.write(command + "\n")
  let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 256, alignment: 1)
  defer { buffer.deallocate() }
  let count = socket.read(into: buffer)
  return String(decoding: UnsafeRawBufferPointer(rebasing: buffer[..<count]), as: UTF8.self)
}

/// Reads `pipe` until a line containing `text` (or its end); what it read.
private func readLine(from pipe: Pipe, containing text: String) -> String {
  var data = Data()
  while !String(decoding: data, as: UTF8.self).contains(text) {
    let chunk = pipe.fileHandleForReading.availableData
    if chunk.isEmpty { break }
    data.append(chunk)
  }
  return String(decoding: data, as: UTF8.self)
}

private struct ExampleError: Error, CustomStringConvertible {
  let description: String
  init(_ description: String) { self.description = description }
}

import Foundation

/// Runs `body`, which blocks (a child process's pipes and exit), on a thread of its own and
/// returns its result to the awaiting test.
///
/// A test that blocked one of the cooperative pool's threads (two on a 2-core machine) while a
/// child process ran left one thread for every other test. With a test whose effect spins on the
/// other one until its store reduces an action (`StoreTests.effectBodiesDoNotRunOnTheStore`), the
/// whole pool stopped until the blocking test ended: every test in the run stalled ~55 s, and
/// three hit their time limits (`.ci/run`, 2026-11-28 13:18 UTC, under load).
///
/// `#expect` belongs outside `body`: the thread has no test context.
func offThePool<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
  try await withCheckedThrowingContinuation { continuation in
    let thread = Thread { continuation.resume(with: Result { try body() }) }
    thread.start()
  }
}

/// What an example printed and how it exited.
struct FinishedExample: Sendable {
  var status: Int32
  var output: String
  var error: String
}

/// Runs the example `name` (built next to the test bundle) to its end with `input` on its standard
/// input, off the cooperative pool (``offThePool(_:)``).
func runExample(
  _ name: String,
  _ arguments: [String] = [],
  input: Data? = nil
) async throws -> FinishedExample {
  let executable = URL(fileURLWithPath: CommandLine.arguments[0])
    .deletingLastPathComponent().appendingPathComponent(name)
  return try await offThePool {
    let process = Process()
    process.executableURL = executable
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
    return FinishedExample(
      status: process.terminationStatus,
      output: String(decoding: out, as: UTF8.self),
      error: String(decoding: err, as: UTF8.self)
    )
  }
}

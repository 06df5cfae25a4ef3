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

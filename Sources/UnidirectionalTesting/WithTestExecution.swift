import Unidirectional

/// Runs `operation`, and every task it starts, on one hand-drained executor, so code that is not
/// a store (a plain async function, tasks the test starts) uses a `TestClock` deterministically.
///
/// ```swift
/// @Test func advance() async {
///   await withTestExecution {
///     let clock = TestClock()
///     let finished = LockIsolated(false)
///     Task {
///       try await clock.sleep(for: .seconds(1))
///       finished.setValue(true)
///     }
///     await clock.advance(by: .milliseconds(500))
///     #expect(!finished.value)
///     await clock.advance(by: .milliseconds(500))
///     #expect(finished.value)
///   }
/// }
/// ```
///
/// Inside the scope:
/// - the operation, its structured children (`async let`, task groups), the tasks it starts
///   with `Task {}` or `Task.detached {}`, and the default actors they call run one job at a
///   time on one executor, drained by the calling thread;
/// - `TestClock/advance(by:)` first lets everything that can run reach its next suspension,
///   then wakes each due sleeper and lets its work run before moving on, and
///   `TestClock/checkSuspension()` looks only after the same settling;
/// - no `Task.yield()` or sleep is needed, and a scenario has one outcome per run.
///
/// Work the executor cannot see (a real clock, a socket, a thread of your own) still runs
/// elsewhere; the scope waits for it to hand back a job. When the operation returns, jobs left
/// on the executor (tasks the test started and did not await) move to the global executor.
///
/// - Parameter operation: The test's code.
/// - Returns: What `operation` returns.
/// - Throws: What `operation` throws (nothing when it cannot throw).
public func withTestExecution<R: Sendable, Failure: Error>(
  _ operation: @escaping @Sendable () async throws(Failure) -> R
) async throws(Failure) -> R {
  let executor = ManualExecutor(capturesTasks: true)
  defer { executor.forwardJobs() }
  let result = await executor.perform { () async -> Result<R, Failure> in
    do throws(Failure) {
      return .success(try await operation())
    } catch {
      return .failure(error)
    }
  }
  return try result.get()
}

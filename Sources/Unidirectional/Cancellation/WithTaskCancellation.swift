/// Runs `operation` so that ``Effect/cancel(id:)`` with an equal `id` cancels just it.
///
/// Use it inside a running effect to make part of the effect cancellable on its own; the rest of
/// the effect continues when the block is cancelled.
///
/// ```swift
/// return .run { send in
///   await send(.started)
///   try? await withTaskCancellation(id: CancelID.download) {
///     try await download()
///   }
///   await send(.cleanedUp)   // still sent when only the download was cancelled
/// }
/// ```
///
/// The block runs in a child task of the effect. Outside an effect (no store running it) it
/// just runs `operation`.
///
/// - Parameters:
///   - id: The identifier; scoped to the store running the effect.
///   - cancelInFlight: When `true`, first cancels other work registered under `id`.
///   - operation: The work.
/// - Returns: What `operation` returns.
/// - Throws: What `operation` throws; `CancellationError` when cancelled before it started.
public func withTaskCancellation<ID: Hashable & Sendable, T: Sendable>(
  id: ID,
  cancelInFlight: Bool = false,
  operation: @escaping @Sendable () async throws -> T
) async throws -> T {
  guard let supervisor = EffectSupervisor.current else {
    return try await operation()
  }
  let key = CancelKey(id)
  let token = EffectToken(lifetime: nil)
  var steps: [PlanStep] = cancelInFlight ? [.cancel([key])] : []
  steps.append(.register(token, [key]))
  var noJobs: [any EffectJob] = []
  supervisor.apply(&steps, jobs: &noJobs)
  return try await withThrowingTaskGroup(of: T.self) { group in
    group.addTask {
      guard supervisor.start(token) else { throw CancellationError() }
      do {
        let value = try await operation()
        await supervisor.finish(token)
        return value
      } catch {
        await supervisor.finish(token)
        throw error
      }
    }
    guard let value = try await group.next() else { throw CancellationError() }
    return value
  }
}

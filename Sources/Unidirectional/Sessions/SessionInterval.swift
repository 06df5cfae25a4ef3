/// A stretch of a registry's work that an observer measures: a send, an activation, a save.
///
/// A ``SessionRegistryObserver`` returns one from ``SessionRegistryObserver/sendStarted(key:)``,
/// ``SessionRegistryObserver/activationStarted(key:within:)`` or
/// ``SessionRegistryObserver/saveStarted(states:sends:)``, and the registry ends it exactly once.
/// `UnidirectionalServer`'s `SessionTracing` makes each a span.
public protocol SessionInterval: Sendable {
  /// The work ended; `error` is what it threw, if it did.
  func end(error: (any Error)?)
}

/// The interval of the registry send running on the current task, so an activation it causes
/// can name it as its parent.
enum SessionIntervals {
  @TaskLocal static var send: (any SessionInterval)?
}

extension StoreRegistry {
  /// Runs a send's `body` inside the interval the observer started for it, if any.
  @usableFromInline
  func measuringSend<Result: Sendable>(
    _ interval: any SessionInterval,
    _ body: () async throws -> Result
  ) async throws -> Result {
    do {
      let result = try await SessionIntervals.$send.withValue(interval) { try await body() }
      interval.end(error: nil)
      return result
    } catch {
      interval.end(error: error)
      throw error
    }
  }
}

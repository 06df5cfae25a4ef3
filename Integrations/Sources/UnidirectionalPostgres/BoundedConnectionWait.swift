import PostgresNIO
import Synchronization

extension PostgresClient {
  /// Runs `body` on a connection of the pool, failing when none is ready within `wait`.
  ///
  /// The pool waits for a connection as long as it takes: while the database is down, every save
  /// would wait until it came back, every request behind those saves with it, and a graceful
  /// shutdown's last saves too. Bounded, a storage fails fast instead (a 503 with `Retry-After`
  /// at the edge). Only the wait is bounded: once `body` has a connection it runs to its end, so
  /// a statement never lands after its caller was told it failed.
  func withConnection<Result: Sendable>(
    within wait: Duration,
    _ body: @escaping @Sendable (PostgresConnection) async throws -> Result
  ) async throws -> Result {
    let race = ConnectionRace()
    return try await withThrowingTaskGroup(of: Result?.self) { group in
      // NB: the statement runs in a child task, so it must not queue behind every task of a busy
      // server (a save holds the sends of its whole batch); the timer can wait its turn.
      group.addTask(priority: .high) {
        try await self.withConnection { connection in
          guard race.settle(.connected) else { throw NoConnectionInTime(wait: wait) }
          return try await body(connection)
        }
      }
      group.addTask(priority: .low) {
        try? await Task.sleep(for: wait)
        if race.settle(.timedOut) { throw NoConnectionInTime(wait: wait) }
        return nil
      }
      while let next = try await group.next() {
        if let result = next {
          group.cancelAll()
          return result
        }
      }
      preconditionFailure("a connection's wait ended with neither its result nor an error")
    }
  }
}

/// Which came first: a connection, or the end of the wait for one.
private final class ConnectionRace: Sendable {
  enum Outcome: Int { case waiting, connected, timedOut }

  private let outcome = Atomic(Outcome.waiting.rawValue)

  /// Settles the race as `outcome`; `false` when the other side settled it first.
  func settle(_ outcome: Outcome) -> Bool {
    self.outcome.compareExchange(
      expected: Outcome.waiting.rawValue,
      desired: outcome.rawValue,
      ordering: .acquiringAndReleasing
    ).exchanged
  }
}

/// No connection of the pool was ready within the storage's wait.
struct NoConnectionInTime: Error, CustomStringConvertible {
  let wait: Duration
  var description: String { "no connection to the database was ready within \(self.wait)" }
}

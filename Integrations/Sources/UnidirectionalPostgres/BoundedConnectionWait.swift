import PostgresNIO
import Synchronization

extension PostgresClient {
  /// Runs `body` on a connection of the pool, failing when none is ready within `wait`, or when
  /// `body` has not returned within `answerWait` more.
  ///
  /// The pool waits for a connection as long as it takes: while the database is down, every save
  /// would wait until it came back, every request behind those saves with it, and a graceful
  /// shutdown's last saves too. And a connection whose peer went silent (a failover that moved
  /// the database's address, a network cut off without a reset) leaves its statement waiting
  /// until the operating system gives up on it, a quarter of an hour. Bounded, a storage fails
  /// fast instead (a 503 with `Retry-After` at the edge): a connection that does not answer in
  /// time is closed, so its statement either ran before the silence or never runs. (One whose
  /// bytes were still on their way may run when the network heals; every acquisition takes a
  /// new fencing token, so such a late save changes nothing.)
  func withConnection<Result: Sendable>(
    within wait: Duration,
    answeringWithin answerWait: Duration? = nil,
    _ body: @escaping @Sendable (PostgresConnection) async throws -> Result
  ) async throws -> Result {
    let race = ConnectionRace()
    return try await withThrowingTaskGroup(of: Result?.self) { group in
      // NB: the statement runs in a child task, so it must not queue behind every task of a busy
      // server (a save holds the sends of its whole batch); the timer can wait its turn.
      group.addTask(priority: .high) {
        try await self.withConnection { connection in
          guard race.connect(connection) else { throw NoConnectionInTime(wait: wait) }
          let result: Result
          do {
            result = try await body(connection)
          } catch {
            // NB: the timer closed the connection under the statement: said as what happened.
            if !race.answered(), let answerWait { throw NoAnswerInTime(wait: answerWait) }
            throw error
          }
          guard race.answered() else {
            // NB: the timer gave up on it first and closes it: closed here too, before the pool
            // takes it back, so no other statement is given a connection about to close.
            try? await connection.close()
            throw NoAnswerInTime(wait: answerWait ?? wait)
          }
          return result
        }
      }
      group.addTask(priority: .low) {
        do { try await Task.sleep(for: wait) } catch { return nil }
        let connection: PostgresConnection
        switch race.waitEnded() {
        case .timedOut: throw NoConnectionInTime(wait: wait)
        case .answered: return nil
        case .connected(let connected): connection = connected
        }
        guard let answerWait else { return nil }
        do { try await Task.sleep(for: answerWait) } catch { return nil }
        if race.closeIfUnanswered() {
          try? await connection.close()
          throw NoAnswerInTime(wait: answerWait)
        }
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

/// What became of a statement's connection: whether one came in time, and whether it answered.
private final class ConnectionRace: Sendable {
  private enum Phase {
    case waiting
    case connected(PostgresConnection)
    case timedOut
    case answered
    case closedSilent
  }

  private let phase = Mutex(Phase.waiting)

  /// The pool gave `connection`: `false` when the wait for it had already ended.
  func connect(_ connection: PostgresConnection) -> Bool {
    self.phase.withLock { phase in
      guard case .waiting = phase else { return false }
      phase = .connected(connection)
      return true
    }
  }

  /// What the end of the wait for a connection found.
  enum AfterWait {
    /// No connection came: the wait timed out.
    case timedOut
    /// A connection came, and its statement has not returned.
    case connected(PostgresConnection)
    /// The statement has already returned.
    case answered
  }

  /// The wait for a connection ended: settles it as timed out if no connection came.
  func waitEnded() -> AfterWait {
    self.phase.withLock { phase in
      switch phase {
      case .waiting:
        phase = .timedOut
        return .timedOut
      case .connected(let connection): return .connected(connection)
      case .timedOut, .answered, .closedSilent: return .answered
      }
    }
  }

  /// The statement returned: `false` when the wait for its answer had already ended.
  func answered() -> Bool {
    self.phase.withLock { phase in
      if case .closedSilent = phase { return false }
      phase = .answered
      return true
    }
  }

  /// The wait for an answer ended: `true` (the caller then closes the connection) if none came.
  func closeIfUnanswered() -> Bool {
    self.phase.withLock { phase in
      guard case .connected = phase else { return false }
      phase = .closedSilent
      return true
    }
  }
}

/// No connection of the pool was ready within the storage's wait.
struct NoConnectionInTime: Error, CustomStringConvertible {
  let wait: Duration
  var description: String {
    """
    no connection to the database was ready within \(self.wait) (it is out of reach, every \
    connection is busy, or it refuses new ones, as it does once the pools of all instances \
    together pass its max_connections)
    """
  }
}

/// A connection's statement had no answer within the storage's wait; the connection was closed.
struct NoAnswerInTime: Error, CustomStringConvertible {
  let wait: Duration
  var description: String { "the database did not answer within \(self.wait)" }
}

extension Effect {
  /// Runs this effect after every effect queued before it under the same `id` has ended, in
  /// the order the reducer returned them.
  ///
  /// By default a store runs effects **concurrently**: two `.run` effects returned by two
  /// consecutive actions start in no guaranteed order, and their actions can arrive in either
  /// order. When order matters (replies to a connection's commands, writes to one file), queue
  /// them:
  ///
  /// ```swift
  /// case .command(let line):
  ///   return .run { send in
  ///     await send(.reply(try await service.handle(line)))
  ///   }
  ///   .queued(id: QueueID.replies)
  /// ```
  ///
  /// - Each queued effect starts when the one queued before it under `id` has ended (finished,
  ///   failed or been cancelled); effects under different ids, and effects not queued, still
  ///   run concurrently with it.
  /// - The place in the queue is taken when the store receives the effect, so the order is the
  ///   order the reducer returned the effects in, whatever the scheduler does.
  /// - Cancelling a queued effect (``cancel(id:)``, its ``StoreTask``, shutdown) cancels it
  ///   whether it is running or still waiting; a waiting one is skipped when its turn comes.
  /// - Queue ids are scoped like cancellation ids: per root store, and per element inside
  ///   `forEach` and `ifLet`.
  ///
  /// - Parameter id: The queue. Any hashable value; its type is part of the identity.
  /// - Returns: The effect, queued.
  public func queued<ID: Hashable & Sendable>(id: ID) -> Self {
    if case .none = self.operation { return .none }
    return Self(operation: .queued(CancelKey(QueueKey(id: id)), self))
  }
}

/// Keeps queue ids apart from cancellation ids with equal values.
private struct QueueKey<ID: Hashable & Sendable>: Hashable, Sendable {
  let id: ID
}

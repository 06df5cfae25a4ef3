// MARK: - Cancellation

extension Effect {
  /// Makes this effect cancellable by an identifier.
  ///
  /// Cancel it later by returning ``cancel(id:)`` with an equal `id` from a reducer. The effect
  /// is registered when the reducer *returns* it, so a cancellation processed afterwards (even
  /// in the same `send`) reaches it, also before it has started. Identifiers are scoped to the
  /// root ``Store`` that runs the effect and keyed by type and value (`1` and `"1"` differ).
  ///
  /// ```swift
  /// return .run { send in await send(.response(try await api.search(query))) }
  ///   .cancellable(id: CancelID.search, cancelInFlight: true)
  /// ```
  ///
  /// - Parameters:
  ///   - id: Any hashable, sendable value. Prefer a dedicated `enum CancelID`.
  ///   - cancelInFlight: When `true`, first cancels in-flight effects with the same `id`.
  /// - Returns: An effect that stops producing actions once cancelled.
  @inlinable
  public func cancellable<ID: Hashable & Sendable>(
    id: ID,
    cancelInFlight: Bool = false
  ) -> Self {
    // NB: a timer takes the identifier in place (no box of its own).
    Self.cancellable(self, key: CancelKey(id), cancelInFlight: cancelInFlight)
  }

  /// `effect` registered under `key`.
  @inlinable
  static func cancellable(
    _ effect: Self,
    key: CancelKey,
    cancelInFlight: Bool
  ) -> Self {
    switch effect.operation {
    case .none where !cancelInFlight:
      return .none
    // NB: not once marked: `.cancelledOnShutdown().cancellable(...)` cancels in flight even while a
    // graceful shutdown refuses the marked timer, which the wrapper keeps.
    case .timer(let timer, keyed: false, marked: false)
    where timer.fold(key, cancelInFlight: cancelInFlight):
      return Self(operation: .timer(timer, keyed: true, marked: false))
    default:
      return Self(operation: .cancellable(key, cancelInFlight: cancelInFlight, effect))
    }
  }

  /// An effect that cancels the effects registered under `id`.
  ///
  /// Once the store has processed it, no action from those effects reaches a reducer, and their
  /// work sees `Task.isCancelled`. Cancelling an identifier with no effects does nothing.
  ///
  /// - Parameter id: The identifier the effects were made cancellable with.
  /// - Returns: An effect that cancels them.
  @inlinable
  public static func cancel<ID: Hashable & Sendable>(id: ID) -> Self {
    Self(operation: .cancel([CancelKey(id)]))
  }

  /// An effect that cancels the effects registered under any of `ids`.
  ///
  /// - Parameter ids: The identifiers.
  /// - Returns: An effect that cancels them.
  public static func cancel<ID: Hashable & Sendable>(ids: some Sequence<ID>) -> Self {
    let keys = ids.map(CancelKey.init)
    return keys.isEmpty ? .none : Self(operation: .cancel(keys))
  }
}

// MARK: - Shutdown

extension Effect {
  /// Marks this effect as one a graceful shutdown cancels at once instead of waiting for.
  ///
  /// A graceful shutdown (``Store/shutdown(gracePeriod:clock:)``, a ``StoreGroup``'s, or a
  /// ``StoreRegistry`` passivating a session) lets running effects finish before it cancels
  /// them. Work that only waits (an idle timer, a heartbeat, a subscription) would hold the
  /// shutdown for its whole grace period: mark it, and it is cancelled as the shutdown begins.
  /// Work that must finish (a save) stays unmarked.
  ///
  /// ```swift
  /// return .send(.idle, after: .seconds(300), clock: clock)
  ///   .cancellable(id: CancelID.idle, cancelInFlight: true)
  ///   .cancelledOnShutdown()
  /// ```
  ///
  /// A marked effect returned while a graceful shutdown is under way is not started. A plain
  /// ``Store/shutdown()`` cancels every effect anyway; the mark changes nothing there.
  ///
  /// - Returns: The same effect, cancelled when a graceful shutdown begins.
  @inlinable
  public func cancelledOnShutdown() -> Self {
    switch self.operation {
    case .none:
      return .none
    case .timer(let timer, let keyed, marked: _):
      // NB: the mark folds into the timer (no box): the idle-timer pattern re-arms per request.
      return Self(operation: .timer(timer, keyed: keyed, marked: true))
    default:
      break
    }
    // NB: a mark on the units, not a cancellation identifier: an identifier cost a second
    // registry entry per unit (a dictionary per store) and a deferred closure per effect.
    return Self(operation: .cancelledOnShutdown(self))
  }
}

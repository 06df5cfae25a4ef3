/// Runs several reducers on the same state and action, in order, keeping every effect.
///
/// ```swift
/// CombineReducers {
///   Validation()
///   Persistence()
/// }
/// ```
///
/// The effects of all the reducers are merged; none is dropped.
public struct CombineReducers<State, Action: Sendable, Reducers: Reducer>: Reducer
where Reducers.State == State, Reducers.Action == Action {
  @usableFromInline let reducers: Reducers

  /// Combines the reducers the builder lists.
  @inlinable
  public init(
    @ReducerBuilder<State, Action> _ build: () -> Reducers
  ) {
    self.reducers = build()
  }

  /// Runs each reducer in order and merges their effects.
  @inlinable
  public func reduce(into state: inout State, action: Action) -> Effect<Action> {
    self.reducers.reduce(into: &state, action: action)
  }
}

/// A reducer that does nothing.
public struct EmptyReducer<State, Action: Sendable>: Reducer {
  /// Creates a reducer that leaves the state alone and returns no effects.
  @inlinable
  public init() {}

  /// Returns ``Effect/none``.
  @inlinable
  public func reduce(into state: inout State, action: Action) -> Effect<Action> {
    .none
  }
}

/// Builds a reducer from a list of reducers: they run in order and all their effects are kept.
///
/// Supports `if`, `if`-`else`, `switch`, optionals and `for` loops.
@resultBuilder
public enum ReducerBuilder<State, Action: Sendable> {
  /// A single reducer.
  @inlinable
  public static func buildExpression<R: Reducer<State, Action>>(_ reducer: R) -> R {
    reducer
  }

  /// An empty body.
  @inlinable
  public static func buildBlock() -> EmptyReducer<State, Action> {
    EmptyReducer()
  }

  /// The first reducer of a list.
  @inlinable
  public static func buildPartialBlock<R: Reducer<State, Action>>(first: R) -> R {
    first
  }

  /// The reducers so far followed by the next one.
  @inlinable
  public static func buildPartialBlock<R0: Reducer<State, Action>, R1: Reducer<State, Action>>(
    accumulated: R0,
    next: R1
  ) -> ReducerSequence<R0, R1> {
    ReducerSequence(first: accumulated, second: next)
  }

  /// A reducer inside `if` without `else`.
  @inlinable
  public static func buildOptional<R: Reducer<State, Action>>(_ reducer: R?) -> OptionalReducer<R> {
    OptionalReducer(wrapped: reducer)
  }

  /// The `if` branch of `if`-`else`.
  @inlinable
  public static func buildEither<R0: Reducer<State, Action>, R1: Reducer<State, Action>>(
    first reducer: R0
  ) -> EitherReducer<R0, R1> {
    .first(reducer)
  }

  /// The `else` branch of `if`-`else`.
  @inlinable
  public static func buildEither<R0: Reducer<State, Action>, R1: Reducer<State, Action>>(
    second reducer: R1
  ) -> EitherReducer<R0, R1> {
    .second(reducer)
  }

  /// Reducers from a `for` loop.
  @inlinable
  public static func buildArray<R: Reducer<State, Action>>(_ reducers: [R]) -> ReducerArray<R> {
    ReducerArray(reducers: reducers)
  }

  /// A reducer under `if #available`.
  @inlinable
  public static func buildLimitedAvailability<R: Reducer<State, Action>>(
    _ reducer: R
  ) -> Reduce<State, Action> {
    Reduce(reducer)
  }
}

/// Two reducers run in order, their effects merged (built by ``ReducerBuilder``).
public struct ReducerSequence<R0: Reducer, R1: Reducer>: Reducer
where R0.State == R1.State, R0.Action == R1.Action {
  @usableFromInline let first: R0
  @usableFromInline let second: R1

  @inlinable
  init(first: R0, second: R1) {
    self.first = first
    self.second = second
  }

  /// Runs `first`, then `second`, and merges their effects.
  @inlinable
  public func reduce(into state: inout R0.State, action: R0.Action) -> Effect<R0.Action> {
    let effect = self.first.reduce(into: &state, action: action)
    return effect.merge(with: self.second.reduce(into: &state, action: action))
  }
}

/// A reducer that may be absent (built from `if` without `else`).
public struct OptionalReducer<Wrapped: Reducer>: Reducer {
  @usableFromInline let wrapped: Wrapped?

  @inlinable
  init(wrapped: Wrapped?) {
    self.wrapped = wrapped
  }

  /// Runs the wrapped reducer if there is one.
  @inlinable
  public func reduce(
    into state: inout Wrapped.State,
    action: Wrapped.Action
  ) -> Effect<Wrapped.Action> {
    self.wrapped?.reduce(into: &state, action: action) ?? .none
  }
}

/// One of two reducers (built from `if`-`else`).
public enum EitherReducer<First: Reducer, Second: Reducer>: Reducer
where First.State == Second.State, First.Action == Second.Action {
  /// The first branch.
  case first(First)
  /// The second branch.
  case second(Second)

  /// Runs the chosen reducer.
  @inlinable
  public func reduce(into state: inout First.State, action: First.Action) -> Effect<First.Action> {
    switch self {
    case .first(let reducer): return reducer.reduce(into: &state, action: action)
    case .second(let reducer): return reducer.reduce(into: &state, action: action)
    }
  }
}

/// Reducers from a `for` loop, run in order.
public struct ReducerArray<Element: Reducer>: Reducer {
  @usableFromInline let reducers: [Element]

  @inlinable
  init(reducers: [Element]) {
    self.reducers = reducers
  }

  /// Runs each reducer in order and merges their effects.
  @inlinable
  public func reduce(
    into state: inout Element.State,
    action: Element.Action
  ) -> Effect<Element.Action> {
    var effects: [Effect<Element.Action>] = []
    for reducer in self.reducers {
      effects.append(reducer.reduce(into: &state, action: action))
    }
    return .merge(effects)
  }
}

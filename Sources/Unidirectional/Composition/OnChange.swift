extension Reducer {
  /// Runs this reducer, then, when `value` changed, returns `effect(oldValue, newValue)` too.
  ///
  /// ```swift
  /// Reduce { state, action in ... }
  ///   .onChange(of: \.query) { _, query in
  ///     .run { send in await send(.results(try await search(query))) }
  ///       .debounce(id: CancelID.search, for: .milliseconds(300), clock: clock)
  ///   }
  /// ```
  ///
  /// - Parameters:
  ///   - value: The value to watch, such as a key path to a property.
  ///   - effect: Builds the effect to run for a change, from the old and new values.
  /// - Returns: A reducer that also runs the change's effect.
  public func onChange<Value: Equatable>(
    of value: @escaping (State) -> Value,
    _ effect: @escaping (_ oldValue: Value, _ newValue: Value) -> Effect<Action>
  ) -> OnChangeReducer<Self, Value, Reduce<State, Action>> {
    OnChangeReducer(base: self, value: value) { old, new in
      Reduce { _, _ in effect(old, new) }
    }
  }

  /// Runs this reducer, then, when `value` changed, the reducer `reducer(oldValue, newValue)`
  /// builds, on the same state and action (as in the Composable Architecture).
  ///
  /// ```swift
  /// Reduce { state, action in ... }
  ///   .onChange(of: \.settings) { _, _ in
  ///     Reduce { state, _ in
  ///       .run { [settings = state.settings] _ in try await save(settings) }
  ///     }
  ///   }
  /// ```
  ///
  /// - Parameters:
  ///   - value: The value to watch, such as a key path to a property.
  ///   - reducer: Builds the reducer to run for a change, from the old and new values.
  /// - Returns: A reducer that also runs the change's reducer.
  public func onChange<Value: Equatable, Change: Reducer>(
    of value: @escaping (State) -> Value,
    @ReducerBuilder<State, Action> _ reducer:
      @escaping (_ oldValue: Value, _ newValue: Value) -> Change
  ) -> OnChangeReducer<Self, Value, Change> where Change.State == State, Change.Action == Action {
    OnChangeReducer(base: self, value: value, change: reducer)
  }
}

/// The reducer `onChange(of:_:)` returns.
public struct OnChangeReducer<Base: Reducer, Value: Equatable, Change: Reducer>: Reducer
where Change.State == Base.State, Change.Action == Base.Action {
  let base: Base
  let value: (Base.State) -> Value
  let change: (Value, Value) -> Change

  /// Runs the base reducer, then the change's reducer when the value changed.
  public func reduce(into state: inout Base.State, action: Base.Action) -> Effect<Base.Action> {
    let old = self.value(state)
    let effect = self.base.reduce(into: &state, action: action)
    let new = self.value(state)
    guard old != new else { return effect }
    return .merge(effect, self.change(old, new).reduce(into: &state, action: action))
  }
}

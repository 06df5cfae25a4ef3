extension Reducer {
  /// Runs this reducer, and the effects it returns, with one dependency set to `value`.
  ///
  /// ```swift
  /// Scope(state: \.child, action: \.child) {
  ///   Child()
  ///     .dependency(\.continuousClock, ImmediateClock())
  /// }
  /// ```
  ///
  /// - Parameters:
  ///   - keyPath: The dependency.
  ///   - value: Its value for this reducer.
  /// - Returns: A reducer that runs this one under the changed dependency.
  public func dependency<Value>(
    _ keyPath: WritableKeyPath<DependencyValues, Value>,
    _ value: Value
  ) -> DependencyModifyingReducer<Self> {
    DependencyModifyingReducer(base: self) { $0[keyPath: keyPath] = value }
  }

  /// Runs this reducer, and the effects it returns, with one dependency changed by `transform`.
  ///
  /// ```swift
  /// Child()
  ///   .transformDependency(\.apiClient) { $0.timeout = .seconds(5) }
  /// ```
  ///
  /// - Parameters:
  ///   - keyPath: The dependency.
  ///   - transform: Changes the dependency's current value.
  /// - Returns: A reducer that runs this one under the changed dependency.
  public func transformDependency<Value>(
    _ keyPath: WritableKeyPath<DependencyValues, Value>,
    transform: @escaping (_ dependency: inout Value) -> Void
  ) -> DependencyModifyingReducer<Self> {
    DependencyModifyingReducer(base: self) { transform(&$0[keyPath: keyPath]) }
  }
}

/// The reducer ``Reducer/dependency(_:_:)`` and ``Reducer/transformDependency(_:transform:)``
/// return.
public struct DependencyModifyingReducer<Base: Reducer>: Reducer {
  let base: Base
  let update: (inout DependencyValues) -> Void

  /// Runs the base reducer under the changed dependencies; its effects capture them.
  public func reduce(into state: inout Base.State, action: Base.Action) -> Effect<Base.Action> {
    withDependencies(self.update) {
      self.base.reduce(into: &state, action: action)
    }
  }
}

/// A feature's logic: how state changes for each action, and which effects run.
///
/// A reducer is a pure function `(inout State, Action) -> Effect<Action>`: it changes the state
/// and returns a *description* of work for the ``Store`` to run. It never awaits and never
/// performs side effects itself.
///
/// Implement ``reduce(into:action:)``:
///
/// ```swift
/// struct Counter: Reducer {
///   struct State: Equatable, Sendable { var count = 0 }
///   enum Action: Sendable { case increment }
///
///   func reduce(into state: inout State, action: Action) -> Effect<Action> {
///     switch action {
///     case .increment:
///       state.count += 1
///       return .none
///     }
///   }
/// }
/// ```
///
/// or compose other reducers in ``body-swift.property``:
///
/// ```swift
/// var body: some Reducer<State, Action> {
///   Reduce { state, action in ... }
///   Logger()
/// }
/// ```
public protocol Reducer<State, Action> {
  /// The state the reducer changes.
  associatedtype State
  /// The actions the reducer handles.
  associatedtype Action: Sendable
  /// The reducer a ``body-swift.property`` builds; `Never` for reducers that implement
  /// ``reduce(into:action:)``.
  associatedtype Body

  /// Changes `state` for `action` and returns the effects to run.
  ///
  /// - Parameters:
  ///   - state: The state to change.
  ///   - action: The action to handle.
  /// - Returns: The work the store should run; ``Effect/none`` for none.
  func reduce(into state: inout State, action: Action) -> Effect<Action>

  /// The reducers this reducer is made of, run in order, with every effect kept.
  @ReducerBuilder<State, Action>
  var body: Body { get }
}

extension Reducer where Body == Never {
  /// Not API: reducers implementing ``reduce(into:action:)`` have no body; the store never
  /// reads it.
  public var body: Body {
    preconditionFailure(
      "'\(Self.self)' has no body; it implements 'reduce(into:action:)'. Do not call 'body'."
    )
  }
}

extension Reducer where Body: Reducer, Body.State == State, Body.Action == Action {
  /// Runs ``body-swift.property``.
  @inlinable
  public func reduce(into state: inout State, action: Action) -> Effect<Action> {
    self.body.reduce(into: &state, action: action)
  }
}

/// The store type of a feature `R`: `StoreOf<Counter>` is `Store<Counter.State, Counter.Action>`.
public typealias StoreOf<R: Reducer> = Store<R.State, R.Action> where R.State: Sendable

/// The reducer type of a feature `R`, for bodies: `var body: some ReducerOf<Self> { ... }`.
public typealias ReducerOf<R: Reducer> = Reducer<R.State, R.Action>

/// The effect type of a feature `R`.
public typealias EffectOf<R: Reducer> = Effect<R.Action>

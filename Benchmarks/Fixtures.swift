import Unidirectional

/// The reducer the store benchmarks run.
struct BenchFeature: Reducer {
  struct State: Sendable {
    var count = 0
  }

  enum Action: Sendable {
    case increment
    case chain(Int)
    case roundTrip
    case burst(Int)
    case park
    case parkCancellable(id: Int)
    case cancel(id: Int)
    /// Re-arms the idle timeout (a request to a session).
    case rearmIdle
    /// Restarts a debounced `.send`.
    case debounced
    /// A cancellable `.send` that cancels the previous one: the bookkeeping a re-arm shares.
    case cancellableSend
  }

  enum TimerID: Hashable, Sendable { case idle, debounce }

  @inline(never)
  func reduce(into state: inout State, action: Action) -> Effect<Action> {
    switch action {
    case .increment:
      state.count &+= 1
      return .none
    case .chain(let remaining):
      state.count &+= 1
      return remaining > 1 ? .send(.chain(remaining - 1)) : .none
    case .roundTrip:
      return .run { send in await send(.increment) }
    case .burst(let count):
      return .run { send in
        for _ in 0..<count { await send(.increment) }
      }
    case .park:
      return .run { _ in
        parkedEffects.withValue { $0 += 1 }
        try await Task.sleep(for: .seconds(3_600))
      }
    case .parkCancellable(let id):
      return .run { _ in try await Task.sleep(for: .seconds(3_600)) }
        .cancellable(id: id)
    case .cancel(let id):
      return .cancel(id: id)
    case .rearmIdle:
      state.count &+= 1
      return .send(.increment, after: .seconds(300), clock: ContinuousClock())
        .cancellable(id: TimerID.idle, cancelInFlight: true)
    case .cancellableSend:
      state.count &+= 1
      return .send(.increment)
        .cancellable(id: TimerID.idle, cancelInFlight: true)
    case .debounced:
      state.count &+= 1
      return .send(.increment)
        .debounce(id: TimerID.debounce, for: .seconds(300), clock: ContinuousClock())
    }
  }
}

/// A reducer that reads its clock dependency for every action, as a feature that schedules with
/// the clock it was given does.
struct ClockReadingFeature: Reducer {
  @Dependency(\.continuousClock) var clock

  func reduce(
    into state: inout BenchFeature.State,
    action: BenchFeature.Action
  ) -> Effect<BenchFeature.Action> {
    withExtendedLifetime(self.clock) { state.count &+= 1 }
    return .none
  }
}

/// The floor for a store: an actor that calls the same reducer, with no effect handling.
actor BareStore {
  var state = BenchFeature.State()
  let reducer = BenchFeature()

  func send(_ action: BenchFeature.Action) {
    _ = self.reducer.reduce(into: &self.state, action: action)
  }

  /// Reduces a chain of `count` actions the way a store would, in one isolated call.
  func sendChain(_ count: Int) {
    var action = BenchFeature.Action.chain(count)
    for remaining in stride(from: count, to: 0, by: -1) {
      _ = self.reducer.reduce(into: &self.state, action: action)
      action = .chain(remaining - 1)
    }
  }

  func increment() {
    self.state.count &+= 1
  }
}

func makeStore() -> StoreOf<BenchFeature> {
  Store(initialState: BenchFeature.State()) { BenchFeature() }
}

/// A session-like feature whose state is `Equatable`: an observer hears of a change only when the
/// state differs, so each reduce compares the state before and after.
struct EquatableSession: Reducer {
  struct State: Sendable, Equatable {
    var requests = 0
    var user = "user-42"
    var cart: [Int] = [1, 2, 3]
  }

  func reduce(into state: inout State, action: BenchFeature.Action) -> Effect<BenchFeature.Action> {
    state.requests &+= 1
    return .none
  }
}

/// An observer of ``EquatableSession`` that does nothing.
struct NoOpSessionObserver: StoreObserver {
  typealias State = EquatableSession.State
  typealias Action = BenchFeature.Action
}

/// An observer that does nothing (the cost of the hook itself).
struct NoOpObserver: StoreObserver {
  typealias State = BenchFeature.State
  typealias Action = BenchFeature.Action
  func actionReduced(_ action: Action, origin: ActionOrigin) {}
  func stateChanged(from oldState: State, to newState: State) {}
}

func makeObservedStore() -> StoreOf<BenchFeature> {
  Store(initialState: BenchFeature.State(), observer: NoOpObserver()) { BenchFeature() }
}

/// How many `.park` effects have started.
let parkedEffects = LockIsolated(0)

/// A parent with one child case that is not `indirect` (so embedding allocates nothing).
struct Host: Reducer {
  struct State: Sendable {
    var child = BenchFeature.State()
  }

  enum Action: Sendable {
    case child(BenchFeature.Action)
    case onAppear

    var child: BenchFeature.Action? {
      get { if case .child(let action) = self { action } else { nil } }
      set {
        guard case .child = self, let newValue else { return }
        self = .child(newValue)
      }
    }
  }

  var body: some Reducer<State, Action> {
    Scope(state: \.child, action: \.child) { BenchFeature() }
  }
}

/// A parent presenting an `Identifiable` child with `ifLet`, and the same parent without it.
struct Presenter: Reducer {
  struct Child: Sendable, Identifiable {
    var id = 7
    var title = "detail"
    var lines: [Int] = [1, 2, 3]
  }

  struct State: Sendable {
    var count = 0
    var detail: Child? = Child()
  }

  enum Action: Sendable {
    case parent
    case detail(BenchFeature.Action)

    var detail: BenchFeature.Action? {
      get { if case .detail(let action) = self { action } else { nil } }
      set {
        guard case .detail = self, let newValue else { return }
        self = .detail(newValue)
      }
    }
  }

  let presents: Bool

  var body: some Reducer<State, Action> {
    if self.presents {
      Reduce { state, _ in
        state.count &+= 1
        return .none
      }
      .ifLet(\.detail, action: \.detail) {
        Reduce<Child, BenchFeature.Action> { _, _ in .none }
      }
    } else {
      Reduce { state, _ in
        state.count &+= 1
        return .none
      }
    }
  }
}

/// A list of 100 rows run with `forEach`, and the same list whose reducer updates the row itself.
struct RowList: Reducer {
  struct Row: Sendable, Identifiable {
    var id: Int
    var taps = 0
  }

  struct State: Sendable {
    var rows = IdentifiedArrayOf<Row>(uniqueElements: (0..<100).map { Row(id: $0) })
  }

  enum Action: Sendable {
    case rows(id: Int, action: BenchFeature.Action)

    var rows: (id: Int, action: BenchFeature.Action)? {
      get { if case .rows(let id, let action) = self { (id, action) } else { nil } }
      set { if let newValue { self = .rows(id: newValue.id, action: newValue.action) } }
    }
  }

  let usesForEach: Bool

  var body: some Reducer<State, Action> {
    if self.usesForEach {
      Reduce { _, _ in .none }
        .forEach(\.rows, action: \.rows) {
          Reduce<Row, BenchFeature.Action> { row, _ in
            row.taps &+= 1
            return .none
          }
        }
    } else {
      Reduce { state, action in
        if case .rows(let id, _) = action { state.rows[id: id]?.taps &+= 1 }
        return .none
      }
    }
  }
}

/// The innermost feature of the `Scope` benchmarks.
struct Leaf: Reducer {
  struct State: Sendable {
    var count = 0
  }

  enum Action: Sendable {
    case increment
  }

  func reduce(into state: inout State, action: Action) -> Effect<Action> {
    state.count &+= 1
    return .none
  }
}

public import Unidirectional

/// The `nth-prime` command's feature: one long computation with progress.
public struct NthPrime: Reducer {
  public struct State: Equatable, Sendable {
    /// Which prime to find.
    public var n: Int
    /// The fraction of primes found so far.
    public var progress: Double = 0
    /// How many numbers were checked (at the last progress report).
    public var checked = 0
    /// The answer, once found.
    public var prime: Int?

    public init(n: Int) {
      self.n = n
    }
  }

  public enum Action: Equatable, Sendable {
    case start
    case progress(Double, checked: Int)
    case response(Int)
    case cancel
  }

  public enum CancelID: Hashable, Sendable { case computation }

  public init() {}

  public func reduce(into state: inout State, action: Action) -> Effect<Action> {
    switch action {
    case .start:
      state.progress = 0
      state.checked = 0
      state.prime = nil
      return .run { [n = state.n] send in
        await computeNthPrime(
          n,
          progress: { .progress($0, checked: $1) },
          response: { .response($0) },
          send: send
        )
      }
      .cancellable(id: CancelID.computation, cancelInFlight: true)
    case .cancel:
      return .cancel(id: CancelID.computation)
    case .progress(let progress, let checked):
      state.progress = progress
      state.checked = checked
      return .none
    case .response(let prime):
      state.progress = 1
      state.prime = prime
      return .none
    }
  }
}

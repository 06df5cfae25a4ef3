public import Unidirectional

/// The `nth-prime` command's feature: one long computation with progress.
public struct NthPrime: Reducer {
  /// The computation's progress and answer.
  public struct State: Equatable, Sendable {
    /// Which prime to find.
    public var n: Int
    /// The fraction of primes found so far.
    public var progress: Double = 0
    /// How many numbers were checked (at the last progress report).
    public var checked = 0
    /// The answer, once found.
    public var prime: Int?

    /// A computation of the `n`th prime, not started.
    public init(n: Int) {
      self.n = n
    }
  }

  /// What the command does and hears back.
  public enum Action: Equatable, Sendable {
    /// Starts (or restarts) the computation.
    case start
    /// The fraction of primes found, and how many numbers were checked.
    case progress(Double, checked: Int)
    /// The answer.
    case response(Int)
    /// Stops the computation (Ctrl-C).
    case cancel
  }

  /// The computation's cancellation id.
  public enum CancelID: Hashable, Sendable { case computation }

  /// Creates the feature.
  public init() {}

  /// Starts, reports and cancels the computation.
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

/// What a root core holds only when it reports to a custom reporter, is observed, is driven by
/// a test executor or is switched for a test: kept out of line (an idle plain store is ~80 B
/// smaller).
@usableFromInline
final class RootCoreExtras<State: Sendable, Action: Sendable> {
  /// Where the store reports issues (the observer's wrapper around the configured one).
  @usableFromInline let reporter: IssueReporter
  @usableFromInline let observer: (@Sendable (StoreEvent<State, Action>) -> Void)?
  /// `==` when `State` is `Equatable` and there is an observer (for `stateChanged`).
  @usableFromInline let stateComparison: ((State, State) -> Bool)?
  let executorPreference: (any TaskExecutor)?
  @usableFromInline let recordsOrigins: Bool
  @usableFromInline let checksDelivery: Bool
  let cancelsTimers: Bool
  /// Whether the observer heard of the shutdown (touched only on the store's executor).
  @exclusivity(unchecked) var hasNotifiedShutDown = false
  /// Origins recorded so far (orders them in diagnostics).
  @exclusivity(unchecked) var originCount = 0

  init(
    reporter: IssueReporter,
    observer: (@Sendable (StoreEvent<State, Action>) -> Void)?,
    stateComparison: ((State, State) -> Bool)?,
    executorPreference: (any TaskExecutor)?,
    recordsOrigins: Bool,
    checksDelivery: Bool,
    cancelsTimers: Bool
  ) {
    self.reporter = reporter
    self.observer = observer
    self.stateComparison = stateComparison
    self.executorPreference = executorPreference
    self.recordsOrigins = recordsOrigins
    self.checksDelivery = checksDelivery
    self.cancelsTimers = cancelsTimers
  }
}

/// The observer of a store that has none: what ``RootCore/publicObserver`` holds then.
struct NoStoreObserver<State: Sendable, Action: Sendable>: StoreObserver {}

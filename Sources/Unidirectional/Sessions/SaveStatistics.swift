/// What a registry's saves carried so far: how well group commit batches.
public struct SaveStatistics: Sendable, Hashable {
  /// Calls to ``SessionStorage/save(_:owner:)``.
  public var saves = 0
  /// States written, over every save (a key's newest state once per save).
  public var states = 0
  /// Sends whose acknowledgement waited on those saves (several sends of one key share a state).
  public var sends = 0

  /// Creates statistics.
  public init(saves: Int = 0, states: Int = 0, sends: Int = 0) {
    self.saves = saves
    self.states = states
    self.sends = sends
  }

  /// States per save.
  public var meanBatchSize: Double {
    self.saves == 0 ? 0 : Double(self.states) / Double(self.saves)
  }
}

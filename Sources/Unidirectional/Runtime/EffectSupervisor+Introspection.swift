/// Counts and states read by tests and benchmarks.
extension EffectSupervisor {
  /// No unit is live and no effect task is alive.
  var isIdle: Bool {
    self.guarded.withLock { $0.machine.isIdle }
  }

  /// Effect tasks started and not ended.
  var liveTaskCount: Int {
    self.guarded.withLock { $0.machine.liveJobs }
  }

  /// Units registered and not finished.
  var liveCount: Int {
    self.guarded.withLock { $0.machine.liveCount }
  }

  /// The unfinished units under one identifier.
  func units(under key: CancelKey) -> [any EffectUnit] {
    self.guarded.withLock { $0.machine.units(under: key) }
  }

  /// Identifiers with at least one unfinished unit.
  var registeredIdentifierCount: Int {
    self.guarded.withLock { $0.machine.registeredIdentifierCount }
  }

  /// The origins of the lifetimes with unfinished units, in the order they were sent.
  var unfinishedOrigins: [EffectOrigin] {
    self.guarded.withLock { $0.machine.unfinishedOrigins }
  }
}

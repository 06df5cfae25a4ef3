/// What the store's observer is told about effects: their failures and their ends.
extension EffectSupervisor {
  /// Records the error the effect running in the current task threw, for its end event.
  @inline(never)
  func recordFailure(_ error: any Error) {
    guard self.observer != nil else { return }
    withUnsafeCurrentTask { task in
      guard let task else { return }
      self.guarded.withLock { guarded in
        guard let id = guarded.machine.runningUnit(where: { $0.isRunning(task) }) else { return }
        guarded.failures[id] = error
      }
    }
  }

  /// The action that started the effect running in the current task, described (for the
  /// uncaught-error report).
  @inline(never)
  func currentEffectAction() -> String? {
    withUnsafeCurrentTask { task -> String? in
      guard let task else { return nil }
      let unit = self.guarded.withLock { guarded -> (any EffectUnit)? in
        guard let id = guarded.machine.runningUnit(where: { $0.isRunning(task) }) else {
          return nil
        }
        return guarded.machine.unit(id)
      }
      return (unit as? any DescribesStartingAction)?.startingActionDescription
    }
  }

  /// Tells the observer a `.run` unit ended, and how.
  @inline(never)
  func reportEnd(
    of unit: any EffectUnit,
    to observer: any StoreObserver,
    duration: Duration
  ) {
    let failure = self.guarded.withLock { guarded -> (any Error)? in
      guarded.failures.isEmpty ? nil : guarded.failures.removeValue(forKey: unit.id)
    }
    let outcome: EffectOutcome
    if let failure {
      outcome = .failed(failure)
    } else {
      outcome = unit.isCancelled ? .cancelled : .finished
    }
    observer.effectEnded(
      EffectReference(unit, context: EffectReference.startingContext),
      outcome: outcome,
      duration: duration
    )
  }
}

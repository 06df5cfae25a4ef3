/// What the store's observer is told about effects: their starts, failures and ends.
extension EffectSupervisor {
  /// The test executor effects run on, if a test harness drives them.
  var drainer: (any ManualDrainer)? { self.extras?.drainer }

  /// The store's observer: effect events.
  var observer: (any StoreObserver)? { self.extras?.observer }

  /// Tells the observer, if the store has one, that `unit` started, and starts timing it: the
  /// stopwatch that ``observeEnd(of:stopwatch:)`` reads (zero without a clock), or `nil` without
  /// an observer.
  ///
  /// NB: out of line, as ``observeEnd(of:stopwatch:)``, so that the observer's existential and
  /// these calls' temporaries stay out of the async frame of the effect that calls them.
  @inline(never)
  func observeStart(of unit: any EffectUnit) -> (@Sendable () -> Duration)? {
    guard let extras = self.extras, let observer = extras.observer else { return nil }
    observer.effectStarted(EffectReference(unit, context: EffectReference.startingContext))
    guard let stopwatch = extras.stopwatch else { return { .zero } }
    return stopwatch()
  }

  /// Tells the observer that `unit` ended: how (its recorded failure, if any) and after how long.
  @inline(never)
  func observeEnd(of unit: any EffectUnit, stopwatch: @Sendable () -> Duration) {
    guard let observer = self.observer else { return }
    self.reportEnd(of: unit, to: observer, duration: stopwatch())
  }

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

import Synchronization

/// The spare timer record: one ended timer a store keeps for the next it arms, so a re-armed
/// timer allocates nothing.
extension EffectSupervisor {
  /// Keeps `timer`, a record that ended (fired, or cancelled and disarmed), for the next timer
  /// the store arms, unless one is kept already.
  ///
  /// It is reused only if nothing else holds it by then (``takeSpareTimer()``): not a `StoreTask`
  /// whose lifetime it stands for, not a unit of that lifetime, not a firing or delivery still
  /// under way. Everything that reads its fields holds it.
  func offerSpareTimer(_ timer: TimerEntry) {
    var current = self.drainingAndSpare.load(ordering: .relaxed)
    guard current & ~Self.drainingBit == 0 else { return }
    let bits = UInt(bitPattern: Unmanaged.passRetained(timer).toOpaque())
    precondition(bits & Self.flagBits == 0, "A timer record at an unaligned address.")
    while true {
      let (exchanged, original) = self.drainingAndSpare.compareExchange(
        expected: current,
        desired: current | bits,
        ordering: .acquiringAndReleasing
      )
      if exchanged { return }
      // Another record was kept meanwhile or the supervisor shut down: give up; only the
      // draining bit changed: try again.
      guard original & ~Self.drainingBit == 0 else { break }
      current = original
    }
    Unmanaged.passUnretained(timer).release()
  }

  /// Keeps no more records, and lets go of the one kept: closed first, so the timers a shutdown
  /// cancels (or that end later) are not kept.
  func closeSpareTimer() {
    self.drainingAndSpare.bitwiseOr(Self.closedBit, ordering: .acquiringAndReleasing)
    self.dropSpareTimer()
  }

  /// Lets go of the kept record, if any.
  func dropSpareTimer() {
    let (original, _) = self.drainingAndSpare.bitwiseAnd(
      Self.flagBits,
      ordering: .acquiringAndReleasing
    )
    if let pointer = UnsafeRawPointer(bitPattern: original & ~Self.flagBits) {
      Unmanaged<TimerEntry>.fromOpaque(pointer).release()
    }
  }

  /// Whether a record is kept for the next timer (tests).
  var hasSpareTimer: Bool {
    self.drainingAndSpare.load(ordering: .acquiring) & ~Self.flagBits != 0
  }

  /// The spare record (``offerSpareTimer(_:)``), if there is one and nothing else holds it.
  @usableFromInline func takeSpareTimer() -> TimerEntry? {
    guard self.drainingAndSpare.load(ordering: .relaxed) & ~Self.flagBits != 0 else {
      return nil
    }
    // Clears the record's bits and keeps the flags.
    let (original, _) = self.drainingAndSpare.bitwiseAnd(
      Self.flagBits,
      ordering: .acquiringAndReleasing
    )
    let bits = original & ~Self.flagBits
    guard let pointer = UnsafeRawPointer(bitPattern: bits) else { return nil }
    var spare = Unmanaged<TimerEntry>.fromOpaque(pointer).takeRetainedValue()
    return isKnownUniquelyReferenced(&spare) ? spare : nil
  }

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
}

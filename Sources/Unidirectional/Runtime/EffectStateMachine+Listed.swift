/// The listed units (``UnitFlags/startsUnlocked``): `.run`s with no identifier, kept in an
/// intrusive list instead of the machine's map of records, whose tasks start them without the lock.
extension EffectStateMachine {
  /// Links `unit` first in the list of runs, retaining it.
  mutating func link(_ unit: RunUnit) {
    let node = Unmanaged.passRetained(unit)
    unit.previous = nil
    unit.next = self.runs
    self.runs?.takeUnretainedValue().previous = node
    self.runs = node
  }

  /// Takes `unit` out of the list; returns the retain the list held, for the caller to release
  /// once it is done with the unit.
  private mutating func unlink(_ unit: RunUnit) -> Unmanaged<RunUnit> {
    let next = unit.next
    if let previous = unit.previous {
      previous.takeUnretainedValue().next = next
    } else {
      self.runs = next
    }
    next?.takeUnretainedValue().previous = unit.previous
    unit.next = nil
    unit.previous = nil
    return Unmanaged.passUnretained(unit)
  }

  /// The listed units, in the list's order (retained: cancelling one may unlink it).
  var listedUnits: [RunUnit] {
    var units: [RunUnit] = []
    var node = self.runs
    while let current = node {
      let unit = current.takeUnretainedValue()
      units.append(unit)
      node = unit.next
    }
    return units
  }

  /// Lets go of every unit still listed, without finishing it: the owner's last word, when it is
  /// itself let go of.
  ///
  /// None is listed by then in a store (a unit's task holds the supervisor until it has finished
  /// the unit, and an abandoned one is finished at once); this keeps one left over from leaking.
  mutating func releaseListed() {
    while let first = self.runs {
      self.unlink(first.takeUnretainedValue()).release()
    }
  }

  /// Whether the unit `id` is in the list (a walk: for an assertion).
  private func isListed(_ id: EffectID) -> Bool {
    self.listedUnits.contains { $0.id == id }
  }

  /// The task running a listed unit, if its task has started it.
  static func runningSlot(of unit: RunUnit) -> Slot? {
    guard unit.loadFlags() & UnitFlags.running != 0 else { return nil }
    return Slot(unitSlotBits: unit.runningSlotBits)
  }

  /// The listed unit `id` of a lifetime's record (not in ``effects``): the list holds it.
  func listedUnit(_ id: EffectID) -> RunUnit {
    assert(self.isListed(id), "A lifetime holds a unit that is neither recorded nor listed.")
    return id.listedUnit()
  }

  /// Finishes a listed unit: out of the list and its lifetime.
  private mutating func removeListed(_ unit: RunUnit) -> Resumptions<Waiter> {
    var resumptions = Resumptions<Waiter>()
    guard !unit.isFinished else { return resumptions }
    unit.markFinished()
    let retained = self.unlink(unit)
    self.leaveLifetime(unit.id, of: unit.lifetime, into: &resumptions)
    retained.release()
    return resumptions
  }

  /// A listed unit's task found it cancelled before it could start it: it is finished (if
  /// whoever cancelled it has not finished it already).
  mutating func skipListed(_ unit: RunUnit) -> Resumptions<Waiter> {
    unit.markCancelled()
    return self.removeListed(unit)
  }

  /// `unit` as a listed unit, if it is one.
  static func listed(_ unit: any EffectUnit) -> RunUnit? {
    guard unit.loadFlags() & UnitFlags.startsUnlocked != 0 else { return nil }
    return unsafeDowncast(unit as AnyObject, to: RunUnit.self)
  }

  /// ``finish(_:)`` of `unit`, listed (its task started it without the lock) or recorded.
  mutating func finish(unit: any EffectUnit) -> Finish {
    guard let listed = Self.listed(unit) else { return self.finish(unit.id) }
    guard !listed.isFinished else { return .finished(Resumptions()) }
    if listed.pins > 0 { return .waitForCancellers }
    return .finished(self.removeListed(listed))
  }

  /// ``parkFinishing(_:waiter:)`` of `unit`, listed or recorded.
  mutating func parkFinishing(unit: any EffectUnit, waiter: Waiter) -> Waiter? {
    guard let listed = Self.listed(unit) else { return self.parkFinishing(unit.id, waiter: waiter) }
    guard listed.pins > 0 else { return waiter }
    self.occasional.value.listedFinishWaiters[listed.id] = waiter
    return nil
  }

  /// ``abandon(_:)`` of `unit`, listed or recorded.
  mutating func abandon(unit: any EffectUnit) -> Resumptions<Waiter> {
    guard let listed = Self.listed(unit) else { return self.abandon(unit.id) }
    guard !listed.isFinished, listed.markCancelledReadingFlags() & UnitFlags.running == 0 else {
      return Resumptions()
    }
    return self.removeListed(listed)
  }

  /// Cancels a listed unit: one that has not started finishes now; a running one is pinned, and
  /// its task is to be cancelled.
  mutating func cancelListed(_ unit: RunUnit, into cancellation: inout Cancellation) {
    guard !unit.isCancelled, !unit.isFinished else { return }
    // NB: marked and read in one atomic step: its task either started it before (its handle is
    // in the unit) or will find it cancelled and not run it.
    let flags = unit.markCancelledReadingFlags()
    guard flags & UnitFlags.cancelled == 0 else { return }
    if flags & UnitFlags.running != 0 {
      unit.pins += 1
      cancellation.listedTasks.append((unit, Slot(unitSlotBits: unit.runningSlotBits)))
    } else {
      cancellation.resumptions.append(contentsOf: self.removeListed(unit))
    }
  }
}

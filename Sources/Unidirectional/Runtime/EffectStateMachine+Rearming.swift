/// Re-arming a timer in place: a one-shot timer under an identifier of its own takes over the
/// record of the armed one it replaces instead of cancelling it and registering anew.
extension EffectStateMachine {
  /// The armed timer that a one-shot timer under `key` alone, cancelling in flight, may take over
  /// in place (``moveRearmed(_:to:)``), instead of cancelling it and registering a new one.
  ///
  /// It is the only unit under `key`, registered under `key` alone, pending (queued in its host,
  /// not running), neither cancelled nor pinned, and marked ``UnitFlags/cancelledOnShutdown``
  /// exactly when `flags` is. `nil` otherwise, and whenever the general path has more to do: the
  /// store has shut down, `key` has a debounce slot, or timers are not cancelled (the mutation
  /// switch).
  ///
  /// NB: `mutating`, and through `update`, though it changes nothing: reading the maps copied the
  /// records out (retaining and releasing what they hold) on every re-arm.
  mutating func rearmCandidate(_ key: CancelKey, flags: UInt8) -> TimerEntry? {
    guard self.phase == .open, self.cancelsTimers,
      let id = self.registry.update(key, { $0.only }) ?? nil,
      self.occasional.read({ !$0.debounces.contains(key) }, unallocated: true)
    else { return nil }
    return self.effects.update(id) { record -> TimerEntry? in
      guard case .pending = record.phase, record.pins == 0, record.keys.isOnly(key) else {
        return nil
      }
      let unitFlags = record.unit.loadFlags()
      let refused = UnitFlags.cancelled | UnitFlags.finished | UnitFlags.lifetimeCancelled
      guard unitFlags & UnitFlags.timer != 0, unitFlags & refused == 0,
        unitFlags & UnitFlags.cancelledOnShutdown == flags & UnitFlags.cancelledOnShutdown
      else { return nil }
      return unsafeDowncast(record.unit as AnyObject, to: TimerEntry.self)
    } ?? nil
  }

  /// The identifiers of `timer` if it is registered, pending and not cancelled (it fired and may
  /// start its effect); `nil` otherwise.
  mutating func keysOfPendingTimer(_ timer: TimerEntry) -> CancelKeys? {
    guard !timer.isCancelled else { return nil }
    return self.effects.update(timer.id) { record -> CancelKeys? in
      guard case .pending = record.phase else { return nil }
      return record.keys
    } ?? nil
  }

  /// Moves a timer its host re-armed in place to `lifetime` (the re-arming send's), or to a
  /// lifetime of its own when the send has none yet; returns that lifetime, and the waiters of the
  /// old one, which finishes if the timer was its last unit.
  ///
  /// A lifetime of its own is the token the timer's old lifetime was, when nothing else holds it
  /// (no `StoreTask`, no other unit: it can no longer be told apart), else a new token.
  mutating func moveRearmed(
    _ timer: TimerEntry,
    to lifetime: (any EffectUnit)?
  ) -> (joined: any EffectUnit, resumptions: Resumptions<Waiter>) {
    var resumptions = Resumptions<Waiter>()
    let id = timer.id
    let old = LifetimeID(timer.lifetime)
    if let lifetime, LifetimeID(lifetime) == old { return (lifetime, resumptions) }
    if lifetime == nil, let kept = self.keptLifetime(of: timer, id: id, old: old) {
      return (kept, resumptions)
    }
    if self.lifetimes.update(old, { $0.effects.remove(id) }) == true,
      let record = self.lifetimes.removeValue(forKey: old)
    {
      resumptions.append(contentsOf: record.waiters)
      if !self.origins.isEmpty { self.origins.removeValue(forKey: old) }
    }
    // NB: a token the old lifetime could hand back was kept above. One that something still holds
    // (a `StoreTask`, a waiter) is not reused, nor is the timer's own identity: it stood for its
    // first send's lifetime, whose task may be held.
    let joined = lifetime ?? EffectToken(lifetime: nil)
    timer.owner = joined
    if self.lifetimes.update(LifetimeID(joined), { $0.effects.insert(id) }) == nil {
      var record = LifetimeRecord(owner: joined)
      record.effects.insert(id)
      self.lifetimes.insert(record, forKey: LifetimeID(joined))
    }
    return (joined, resumptions)
  }

  /// The lifetime of a re-armed timer whose send has none, kept as it stands.
  ///
  /// Its token and its record stay when the lifetime could not be told from the re-arming send's:
  /// the timer is its only unit, nothing waits on it, it is a token that was not cancelled, and
  /// nothing but the timer and the record holds that token (no `StoreTask`). `nil`, with nothing
  /// changed, otherwise.
  ///
  /// NB: an idle timer re-armed by every request takes this path. Without it, each request took
  /// a new token (an allocation: the re-arm's allocation gate needs this path), and took the
  /// record out to put the same one back.
  private mutating func keptLifetime(
    of timer: TimerEntry,
    id: EffectID,
    old: LifetimeID
  ) -> EffectToken? {
    let token: Unmanaged<EffectToken>
    do {
      // NB: in a scope of its own, so the existential reference is gone before the check below.
      // A token with a flag was cancelled (through a task since dropped): it stays spent.
      guard let owner = timer.owner,
        ObjectIdentifier(type(of: owner)) == ObjectIdentifier(EffectToken.self),
        owner.loadFlags() == 0
      else { return nil }
      token = Unmanaged.passUnretained(unsafeDowncast(owner as AnyObject, to: EffectToken.self))
    }
    // Safety of the unretained reference: the token is `old`'s owner, whose record holds it; the
    // record stays in the map throughout.
    timer.owner = nil
    let kept =
      self.lifetimes.update(old) { record -> Bool in
        record.effects.only == id && record.waiters.isEmpty
          && record.owner.isOnlyReferenceToToken()
      } ?? false
    let owner = token.takeUnretainedValue()
    timer.owner = owner
    guard kept else { return nil }
    // The send that armed it is over: its origin goes, as it would with its record; the re-arming
    // send records its own.
    if !self.origins.isEmpty { self.origins.removeValue(forKey: old) }
    return owner
  }

  /// Records what started a lifetime, for test diagnostics.
  mutating func setOrigin(_ origin: EffectOrigin, of lifetime: any EffectUnit) {
    let lifetimeID = LifetimeID(lifetime)
    guard self.lifetimes.contains(lifetimeID) else { return }
    self.origins[lifetimeID] = origin
  }
}

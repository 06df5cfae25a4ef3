/// The debounce timers of one store (``Effect/debounce(id:for:clock:)``), as a value: one timer
/// per identifier, whose deadline and body every newer debounced effect replaces in place while
/// it sleeps.
struct DebounceTimers: Sendable {
  /// The one timer of an identifier.
  private struct Slot: Sendable {
    let generation: UInt64
    /// An instant of the debounce's clock.
    var deadline: any Sendable
    /// The latest debounced body; `nil` once fired.
    var body: (any Sendable)?
    /// Whether it takes no new deadline (it runs its body, or may have been cancelled): a newer
    /// debounced effect starts a new timer.
    var hasFired = false
  }

  /// What a debounce timer that woke at its deadline does next.
  enum Wake {
    /// Re-armed while it slept: sleep again until this deadline.
    case sleep(until: any Sendable)
    /// Its deadline has come: run this body.
    case fire(any Sendable)
    /// Cancelled or replaced: end.
    case end
  }

  private var slots: [CancelKey: Slot] = [:]
  private var nextGeneration: UInt64 = 0

  /// Identifiers with a debounce timer.
  var count: Int { self.slots.count }

  /// Whether no identifier has a debounce timer.
  var isEmpty: Bool { self.slots.isEmpty }

  func contains(_ key: CancelKey) -> Bool { self.slots[key] != nil }

  /// Re-arms the sleeping timer of `key` with a new deadline and body; `false` when there is none
  /// (or it has fired), after which the caller starts a new timer through ``arm(_:deadline:body:)``.
  mutating func rearm(_ key: CancelKey, deadline: any Sendable, body: any Sendable) -> Bool {
    guard let index = self.slots.index(forKey: key), !self.slots.values[index].hasFired else {
      return false
    }
    self.slots.values[index].deadline = deadline
    self.slots.values[index].body = body
    return true
  }

  /// Records a new sleeping timer for `key`, replacing any; returns its generation.
  mutating func arm(_ key: CancelKey, deadline: any Sendable, body: any Sendable) -> UInt64 {
    defer { self.nextGeneration += 1 }
    self.slots[key] = Slot(generation: self.nextGeneration, deadline: deadline, body: body)
    return self.nextGeneration
  }

  /// Timer `generation` of `key` woke: it fires if its deadline is the one it slept until
  /// (`isSameDeadline`).
  mutating func wake(
    _ key: CancelKey,
    generation: UInt64,
    sleptUntil isSameDeadline: (any Sendable) -> Bool
  ) -> Wake {
    guard let index = self.slots.index(forKey: key),
      self.slots.values[index].generation == generation
    else { return .end }
    let slot = self.slots.values[index]
    guard isSameDeadline(slot.deadline) else { return .sleep(until: slot.deadline) }
    guard let body = slot.body else { return .end }
    self.slots.values[index].hasFired = true
    self.slots.values[index].body = nil
    return .fire(body)
  }

  /// Timer `generation`'s body has ended: its slot goes, unless a newer timer replaced it.
  mutating func end(_ key: CancelKey, generation: UInt64) {
    precondition(generation < self.nextGeneration, "A debounce timer ended that was never armed.")
    guard let index = self.slots.index(forKey: key),
      self.slots.values[index].generation == generation
    else { return }
    self.slots.remove(at: index)
  }

  /// Forgets the timer of `key`: its identifier was cancelled.
  mutating func cancel(_ key: CancelKey) {
    self.slots.removeValue(forKey: key)
  }

  /// Forgets every timer: the store's effects were all cancelled.
  mutating func cancelAll() {
    self.slots.removeAll()
  }

  /// The timers under `keys` take no new deadline (a cancelled unit under them may be their timer).
  mutating func stopRearming(_ keys: CancelKeys) {
    for key in keys {
      if let index = self.slots.index(forKey: key) { self.slots.values[index].hasFired = true }
    }
  }
}

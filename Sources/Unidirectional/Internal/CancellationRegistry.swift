/// A cancellation identifier keyed by its type and its value, so `1` and `"1"` never collide
/// (and neither do `1 as Int` and `1 as UInt8`, which `AnyHashable` alone would merge).
@usableFromInline struct CancelKey: Hashable, Sendable {
  // Safety: `AnyHashable` is not `Sendable`; `value` is only ever built from a
  // `Hashable & Sendable` identifier (see `init`), so sharing it is sound.
  private nonisolated(unsafe) let value: AnyHashable
  private let type: ObjectIdentifier

  init<ID: Hashable & Sendable>(_ id: ID) {
    // Safety: `id` is `Sendable`; the `AnyHashable` box only wraps it.
    self.value = AnyHashable(id)
    self.type = ObjectIdentifier(ID.self)
  }

  @usableFromInline static func == (lhs: Self, rhs: Self) -> Bool {
    lhs.type == rhs.type && lhs.value == rhs.value
  }

  @usableFromInline func hash(into hasher: inout Hasher) {
    hasher.combine(self.type)
    hasher.combine(self.value)
  }

  /// The identifier as the user wrote it, for diagnostics.
  var debugDescription: String {
    "\(self.value.base)"
  }
}

/// Which effects are registered under which cancellation identifiers.
///
/// A pure state machine: the ``EffectRuntime`` owns one per root store and calls it under its
/// lock. Registering and removing an effect is O(1) (average, hashing); looking up an identifier
/// touches only the effects registered under it.
struct CancellationRegistry {
  private var entries: [CancelKey: [ObjectIdentifier: EffectBox]] = [:]

  /// The number of identifiers with at least one registered effect.
  var count: Int { self.entries.count }

  var isEmpty: Bool { self.entries.isEmpty }

  /// Registers `box` under each of its keys.
  mutating func register(_ box: EffectBox, under keys: [CancelKey]) {
    for key in keys {
      self.entries[key, default: [:]][ObjectIdentifier(box)] = box
    }
  }

  /// Removes `box` from each of the keys it was registered under; drops emptied keys.
  mutating func remove(_ box: EffectBox, from keys: [CancelKey]) {
    for key in keys {
      guard let index = self.entries.index(forKey: key) else { continue }
      self.entries.values[index].removeValue(forKey: ObjectIdentifier(box))
      if self.entries.values[index].isEmpty {
        self.entries.remove(at: index)
      }
    }
  }

  /// The effects registered under `key` (empty for an unknown key).
  func boxes(for key: CancelKey) -> Dictionary<ObjectIdentifier, EffectBox>.Values? {
    self.entries[key]?.values
  }

  /// The number of effects registered under `key`.
  func count(for key: CancelKey) -> Int {
    self.entries[key]?.count ?? 0
  }
}

/// The unit that stands for a lifetime, as its record holds it: a single reference, so that a
/// re-arm can ask whether the record holds the only reference to a token
/// (``EffectStateMachine/keptLifetime(of:id:old:)``).
// Safety: `object` is only ever set from an `any EffectUnit`, a protocol that refines `Sendable`;
// nothing assigns it another value (`isOnlyReferenceToToken()` reads it in place).
struct LifetimeOwner: @unchecked Sendable {
  private var object: AnyObject

  init(_ unit: any EffectUnit) {
    self.object = unit
  }

  /// The unit (a dynamic cast: for cancelling every lifetime, not per action).
  var unit: any EffectUnit {
    guard let unit = self.object as? any EffectUnit else {
      preconditionFailure("A lifetime's owner was set from something other than an effect unit.")
    }
    return unit
  }

  /// Whether the unit is an ``EffectToken`` and this is the only reference to it.
  ///
  /// NB: asked of the reference as an `EffectToken`: `isKnownUniquelyReferenced` of an `AnyObject`
  /// (or an `any AnyObject & Sendable`) is not inlined, and its caller passes it a retained copy,
  /// so it always answered `false` (seen in the disassembly).
  mutating func isOnlyReferenceToToken() -> Bool {
    guard ObjectIdentifier(type(of: self.object)) == ObjectIdentifier(EffectToken.self) else {
      return false
    }
    return withUnsafeMutablePointer(to: &self.object) { pointer in
      // Safety: a class reference is one pointer whatever its static type, and this one was just
      // checked to be an `EffectToken`.
      pointer.withMemoryRebound(to: EffectToken.self, capacity: 1) {
        isKnownUniquelyReferenced(&$0.pointee)
      }
    }
  }
}

/// The identity of a lifetime: its first unit's.
///
/// The state machine keeps that unit alive while it has a record of the lifetime, so the identity
/// is never reused while it is in use.
struct LifetimeID: Hashable, Sendable {
  private let raw: ObjectIdentifier

  init(_ lifetime: any EffectUnit) {
    self.raw = ObjectIdentifier(lifetime)
  }
}

/// The action (and where it was sent) that started a lifetime, for test diagnostics.
package struct EffectOrigin: Sendable {
  /// The order in which the actions were sent.
  package var sequence: Int
  package var action: String
  package var fileID: String
  package var filePath: String
  package var line: Int
  package var column: Int
}

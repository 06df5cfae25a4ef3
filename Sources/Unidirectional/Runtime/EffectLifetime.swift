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
///
/// NB: the action is described, and the location's strings made, only when read: a test store
/// records an origin for every action that starts an effect, and reads one only to report an
/// effect left running; describing them at every send slowed every step. (An action
/// holding a reference is described as that reference's object is at the report. Only a test
/// store records origins.)
package struct EffectOrigin: Sendable {
  /// The order in which the actions were sent.
  package let sequence: Int
  private let sentAction: any Sendable
  private let location: SourceLocation

  init(sequence: Int, action: any Sendable, location: SourceLocation) {
    self.sequence = sequence
    self.sentAction = action
    self.location = location
  }

  /// The action, as a test's diagnostics print it (`.increment`).
  package var action: String { debugDescription(of: self.sentAction) }
  package var fileID: String { "\(self.location.fileID)" }
  package var filePath: String { "\(self.location.filePath)" }
  package var line: Int { Int(self.location.line) }
  package var column: Int { Int(self.location.column) }
}

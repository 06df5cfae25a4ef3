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
/// effect left running. Described at every send, they were ~7% of a test store's step. (An action
/// holding a reference is described as that reference's object is at the report. Only a test
/// store records origins.)
package struct EffectOrigin: Sendable {
  /// The order in which the actions were sent.
  package var sequence: Int
  private let source: Source

  private enum Source: Sendable {
    case sent(action: any Sendable, location: SourceLocation)
    case described(action: String, fileID: String, filePath: String, line: Int, column: Int)
  }

  init(sequence: Int, action: any Sendable, location: SourceLocation) {
    self.sequence = sequence
    self.source = .sent(action: action, location: location)
  }

  package init(
    sequence: Int,
    action: String,
    fileID: String,
    filePath: String,
    line: Int,
    column: Int
  ) {
    self.sequence = sequence
    self.source = .described(
      action: action,
      fileID: fileID,
      filePath: filePath,
      line: line,
      column: column
    )
  }

  /// The action, as a test's diagnostics print it (`.increment`).
  package var action: String {
    switch self.source {
    case .sent(let action, _): debugDescription(of: action)
    case .described(let action, _, _, _, _): action
    }
  }

  package var fileID: String {
    switch self.source {
    case .sent(_, let location): "\(location.fileID)"
    case .described(_, let fileID, _, _, _): fileID
    }
  }

  package var filePath: String {
    switch self.source {
    case .sent(_, let location): "\(location.filePath)"
    case .described(_, _, let filePath, _, _): filePath
    }
  }

  package var line: Int {
    switch self.source {
    case .sent(_, let location): Int(location.line)
    case .described(_, _, _, let line, _): line
    }
  }

  package var column: Int {
    switch self.source {
    case .sent(_, let location): Int(location.column)
    case .described(_, _, _, _, let column): column
    }
  }
}

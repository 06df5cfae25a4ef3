/// Why a ``StoreRegistry`` did not deliver an action to a session.
///
/// Each case carries the session's key (as `String(describing:)`) and a message a person can act
/// on; ``description`` names both. A registry never drops an action silently: it either reduces it
/// or throws one of these.
public enum SessionError: Error, Sendable, Hashable, CustomStringConvertible {
  /// The registry has shut down (or began to): it takes no more actions.
  case shutDown(key: String, message: String)
  /// Another owner holds the session's lease (or took it over): send to that owner, or retry
  /// once its lease has expired.
  case ownershipLost(key: String, message: String)
  /// The session's storage failed: loading, saving or taking its lease.
  case storageFailed(key: String, message: String)
  /// The session's stored state cannot be read: saved by a newer version of the app, or it no
  /// longer decodes or migrates. It is left as it is (never overwritten, never reset); only this
  /// key's sends fail.
  case stateUnreadable(key: String, storedVersion: Int?, message: String)

  /// The key of the session, as `String(describing:)`.
  public var key: String {
    switch self {
    case .shutDown(let key, _), .ownershipLost(let key, _), .storageFailed(let key, _),
      .stateUnreadable(let key, _, _):
      key
    }
  }

  /// What went wrong, and what to do about it.
  public var message: String {
    switch self {
    case .shutDown(_, let message), .ownershipLost(_, let message),
      .storageFailed(_, let message), .stateUnreadable(_, _, let message):
      message
    }
  }

  /// The key and the message, for logs and responses.
  public var description: String {
    switch self {
    case .shutDown: "session '\(self.key)': registry shut down: \(self.message)"
    case .ownershipLost: "session '\(self.key)': ownership lost: \(self.message)"
    case .storageFailed: "session '\(self.key)': storage failed: \(self.message)"
    case .stateUnreadable: "session '\(self.key)': stored state unreadable: \(self.message)"
    }
  }
}

/// A send under an idempotency key the session already applied with another request
/// (``StoreRegistry/send(_:to:idempotencyKey:fingerprint:)``): it is not reduced.
///
/// The client reused a key for a new request; retrying cannot succeed. A server answers it as the
/// IETF draft on the `Idempotency-Key` header does, with 422.
public struct IdempotencyKeyReused: Error, Sendable, Equatable, CustomStringConvertible {
  /// The session's key, as `String(describing:)` gives it.
  public let key: String
  /// The idempotency key that was reused.
  public let idempotencyKey: String

  /// Creates the error.
  public init(key: String, idempotencyKey: String) {
    self.key = key
    self.idempotencyKey = idempotencyKey
  }

  /// Names the session and the key, and what to do.
  public var description: String {
    """
    the idempotency key '\(self.idempotencyKey)' of session '\(self.key)' was used before with \
    another request; send a new request under a new key
    """
  }
}

/// A state as a backend stored it, handed to a migration when it was saved at an older state
/// version than the app's.
///
/// ```swift
/// let storage = try await SQLiteSessionStorage<String, Cart.State>(
///   path: "carts.sqlite", stateVersion: 2
/// ) { stored in
///   try Cart.State(upgrading: stored.decode(CartV1.self))
/// }
/// ```
public struct StoredState: Sendable {
  /// The state version it was saved at.
  public let version: Int
  /// The stored bytes, as the backend encoded them.
  public let bytes: [UInt8]
  private let decoder: @Sendable (any Decodable.Type, [UInt8]) throws -> any Decodable

  /// Creates a stored state that decodes with the backend's own decoder.
  ///
  /// - Parameters:
  ///   - version: The state version it was saved at.
  ///   - bytes: The stored bytes.
  ///   - decode: Decodes a value of the given type from the bytes (the backend's encoding).
  public init(
    version: Int,
    bytes: [UInt8],
    decode: @escaping @Sendable (any Decodable.Type, [UInt8]) throws -> any Decodable
  ) {
    self.version = version
    self.bytes = bytes
    self.decoder = decode
  }

  /// Decodes the stored bytes as `type` (typically the state type of the version that saved it).
  public func decode<T: Decodable>(_ type: T.Type) throws -> T {
    let value = try self.decoder(type, self.bytes)
    guard let typed = value as? T else {
      throw SessionStateUnreadable(
        key: "",
        storedVersion: self.version,
        reason: "the backend's decoder returned \(Swift.type(of: value)), not \(T.self)"
      )
    }
    return typed
  }

  /// Reads this stored state as the app's current `State`: decodes it when it was saved at
  /// `currentVersion`, migrates it when older, and refuses it when newer.
  ///
  /// For backends: every refusal is a ``SessionStateUnreadable`` naming `key`, the stored version
  /// and why, and nothing is written.
  ///
  /// - Parameters:
  ///   - type: The app's state type.
  ///   - key: The session's key, for the error.
  ///   - currentVersion: The state version the app reads and writes.
  ///   - migrate: Turns an older stored state into the current one; `nil`: the app has none.
  /// - Returns: The state, decoded or migrated.
  /// - Throws: ``SessionStateUnreadable`` for a newer version, a missing or failing migration, or
  ///   bytes that do not decode.
  public func read<State: Decodable>(
    as type: State.Type,
    key: String,
    currentVersion: Int,
    migrate: (@Sendable (StoredState) throws -> State)?
  ) throws(SessionStateUnreadable) -> State {
    if self.version > currentVersion {
      throw SessionStateUnreadable(
        key: key,
        storedVersion: self.version,
        reason: """
          it was saved by a newer version of the app (state version \(self.version)); this one \
          reads up to \(currentVersion)
          """
      )
    }
    do {
      if self.version == currentVersion { return try self.decode(State.self) }
      guard let migrate else {
        throw SessionStateUnreadable(
          key: key,
          storedVersion: self.version,
          reason: """
            it is at state version \(self.version), older than the app's \(currentVersion), and \
            the storage was given no migration
            """
        )
      }
      return try migrate(self)
    } catch let error as SessionStateUnreadable where error.key == key {
      throw error
    } catch {
      let step = self.version == currentVersion ? "decoding" : "migrating"
      throw SessionStateUnreadable(
        key: key,
        storedVersion: self.version,
        reason: "\(step) it failed: \(error) (\(Swift.type(of: error)))"
      )
    }
  }
}

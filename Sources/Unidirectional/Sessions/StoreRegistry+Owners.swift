/// The instance that holds a session's lease, as a registry last learned it.
public struct SessionOwner: Sendable, Hashable {
  /// Its owner name.
  public var name: String
  /// The address it advertised (how other instances reach it), if it gave one.
  public var address: String?
  /// How long its lease had left when this was learned, if the storage said.
  public var leaseLeft: Duration?

  /// Creates an owner.
  public init(name: String, address: String?, leaseLeft: Duration?) {
    self.name = name
    self.address = address
    self.leaseLeft = leaseLeft
  }

  /// What a send this owner's lease refuses is told.
  var refusal: String {
    let at = self.address.map { " at \($0)" } ?? ""
    let left = self.leaseLeft.map { " (its lease has \(Self.seconds($0)) s left)" } ?? ""
    return """
      '\(self.name)'\(at) owns this session\(left); send to that owner, or retry once its lease \
      has expired
      """
  }

  /// Whole seconds, rounded up, at least 1: what a `Retry-After` says.
  public static func seconds(_ duration: Duration) -> Int {
    let (seconds, attoseconds) = duration.components
    return max(1, Int(seconds) + (attoseconds > 0 ? 1 : 0))
  }
}

extension StoreRegistry {
  /// The address this registry records with every lease it takes.
  ///
  /// How other instances of the service reach it (for example `http://10.0.0.7:8080`), so they
  /// can forward a key's requests to it. `nil` records none.
  public var advertisedAddress: String? {
    get { self.guarded.withLock { $0.advertisedAddress } }
    set { self.guarded.withLock { $0.advertisedAddress = newValue } }
  }

  /// The owner of `key` as this registry last learned it, when a send found the key's lease held
  /// by another instance (``SessionError/ownershipLost(key:message:)``); `nil` otherwise.
  ///
  /// A hint for routing, not a lease: the owner may have let the key go since. A send to this
  /// registry always asks the storage again.
  ///
  /// - Parameter key: The session's key.
  /// - Returns: The owner, its address and the time its lease had left.
  public func owner(of key: Key) -> SessionOwner? {
    self.guarded.withLock { $0.owners[key] }
  }

  /// Forgets what ``owner(of:)`` knows of `key` (its owner did not answer).
  public func forgetOwner(of key: Key) {
    self.guarded.withLock { _ = $0.owners.removeValue(forKey: key) }
  }

  /// Learns `owner` as `key`'s holder and returns what a request for `key` here is refused with.
  func ownershipLost(to owner: SessionOwner, of key: Key) -> SessionError {
    self.learn(owner, of: key)
    return .ownershipLost(key: "\(key)", message: owner.refusal)
  }

  /// Records `owner` as `key`'s (the table is bounded: past its size it starts afresh).
  func learn(_ owner: SessionOwner, of key: Key) {
    self.guarded.withLock { guarded in
      if guarded.owners.count >= 10_000, guarded.owners[key] == nil { guarded.owners = [:] }
      guarded.owners[key] = owner
    }
  }
}

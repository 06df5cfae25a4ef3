import Unidirectional

/// A test storage that wraps another and passes every call it does not define itself to `base`.
///
/// (Saves reach `save(_:owner:)` through `SessionStorage`'s default `save(owner:taking:)`, so a
/// wrapper that gates or records `save(_:owner:)` sees the registry's saves.)
protocol PassThroughStorage: SessionStorage where Key == Base.Key, State == Base.State {
  associatedtype Base: SessionStorage
  var base: Base { get }
}

extension PassThroughStorage {
  var leaseDuration: Duration { self.base.leaseDuration }

  func acquire(
    _ key: Key,
    owner: String,
    address: String?
  ) async throws
    -> SessionAcquisition<State>
  {
    try await self.base.acquire(key, owner: owner, address: address)
  }

  func load(_ key: Key) async throws -> State? {
    try await self.base.load(key)
  }

  func save(
    _ writes: [SessionWrite<Key, State>],
    owner: String
  ) async throws
    -> [SessionSaveResult]
  {
    try await self.base.save(writes, owner: owner)
  }

  func erase(_ key: Key, token: UInt64?, owner: String) async throws -> SessionSaveResult {
    try await self.base.erase(key, token: token, owner: owner)
  }

  func renew(_ leases: [SessionLease<Key>], owner: String) async throws -> [Key] {
    try await self.base.renew(leases, owner: owner)
  }

  func release(_ leases: [SessionLease<Key>], owner: String) async throws {
    try await self.base.release(leases, owner: owner)
  }
}

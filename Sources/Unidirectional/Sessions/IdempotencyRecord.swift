/// A session's idempotency window as storage keeps it: the 64-bit digests of its newest keys,
/// oldest first.
///
/// Digests, not the keys: 8 bytes a key whatever its length, stored as raw bytes (``bytes``), so
/// a window of 1,000 keys is 8 KB and costs a copy to save. Two keys of one session with the same
/// digest would make the second a replay of the first; with 64-bit FNV-1a over at most a window
/// of keys that is about one chance in 10^13 a session, and a client can only collide its own
/// session's keys.
public struct IdempotencyRecord: Sendable, Hashable {
  /// The digests, oldest first.
  public var digests: [UInt64]

  /// Creates a record of `digests`, oldest first.
  public init(digests: [UInt64] = []) {
    self.digests = digests
  }

  /// Reads a record from ``bytes``; `nil` if they are not a whole number of digests.
  public init?(bytes: [UInt8]) {
    guard bytes.count % 8 == 0 else { return nil }
    self.digests = bytes.withUnsafeBytes { raw in
      stride(from: 0, to: raw.count, by: 8).map {
        UInt64(littleEndian: raw.loadUnaligned(fromByteOffset: $0, as: UInt64.self))
      }
    }
  }

  /// The digests as bytes (little-endian, 8 a digest), for a backend to store.
  public var bytes: [UInt8] {
    // NB: copied whole, not a byte at a time: a window of 1,000 keys is 8 KB, written with every
    // save whose window changed.
    #if _endian(little)
    return self.digests.withUnsafeBytes { Array($0) }
    #else
    return self.digests.map(\.littleEndian).withUnsafeBytes { Array($0) }
    #endif
  }

  /// Whether the record holds `key`.
  public func contains(_ key: String) -> Bool {
    self.digests.contains(Self.digest(of: key))
  }

  /// The digest of an idempotency key: 64-bit FNV-1a of its UTF-8 (stable across processes and
  /// versions, unlike `Hasher`).
  public static func digest(of key: String) -> UInt64 {
    var hash: UInt64 = 0xcbf2_9ce4_8422_2325
    for byte in key.utf8 {
      hash ^= UInt64(byte)
      hash = hash &* 0x0000_0100_0000_01b3
    }
    return hash
  }
}

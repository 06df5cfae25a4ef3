/// A session's idempotency window as storage keeps it: the 64-bit digests of its newest keys,
/// oldest first, and, for keys sent with a request's fingerprint, the fingerprint's digest.
///
/// Digests, not the keys: 8 bytes a key whatever its length (12 with a fingerprint), stored as
/// raw bytes (``bytes``), so a window of 1,000 keys is 8 KB and costs a copy to save. Two keys of
/// one session with the same digest would make the second a replay of the first; with 64-bit
/// FNV-1a over at most a window of keys that is about one chance in 10^13 a session, and a client
/// can only collide its own session's keys.
public struct IdempotencyRecord: Sendable, Hashable {
  /// The digests, oldest first.
  public var digests: [UInt64]
  /// The digests of the requests the keys came with (``fingerprint(of:)``).
  ///
  /// In the order of ``digests``; 0 for a key sent without one. Empty when no key came with one.
  public var fingerprints: [UInt32]

  /// Creates a record of `digests`, oldest first, and the fingerprints they came with.
  ///
  /// - Parameters:
  ///   - digests: The keys' digests (``digest(of:)``), oldest first.
  ///   - fingerprints: Their requests' fingerprints, one a digest (0: none), or empty for none.
  public init(digests: [UInt64] = [], fingerprints: [UInt32] = []) {
    precondition(
      fingerprints.isEmpty || fingerprints.count == digests.count,
      "An idempotency record has one fingerprint a digest, or none."
    )
    self.digests = digests
    self.fingerprints = fingerprints.contains { $0 != 0 } ? fingerprints : []
  }

  /// The first byte of a record that holds fingerprints.
  ///
  /// Its length, `1 + 12 × keys`, is odd, and a record without them is 8 bytes a key, so a reader
  /// tells the two apart; an older version of the library refuses the longer form rather than
  /// misreading it.
  private static let withFingerprints: UInt8 = 2

  /// Reads a record from ``bytes``; `nil` if they are neither form of one.
  public init?(bytes: [UInt8]) {
    if bytes.count % 8 == 0 {
      self.init(digests: Self.load(UInt64.self, bytes[...]))
    } else if bytes.count % 12 == 1, bytes[0] == Self.withFingerprints {
      let count = bytes.count / 12
      let digests = Self.load(UInt64.self, bytes[1..<(1 + 8 * count)])
      let fingerprints = Self.load(UInt32.self, bytes[(1 + 8 * count)...])
      guard fingerprints.contains(where: { $0 != 0 }) else { return nil }
      self.init(digests: digests, fingerprints: fingerprints)
    } else {
      return nil
    }
  }

  private static func load<Word: FixedWidthInteger>(
    _: Word.Type,
    _ bytes: ArraySlice<UInt8>
  )
    -> [Word]
  {
    bytes.withUnsafeBytes { raw in
      stride(from: 0, to: raw.count, by: MemoryLayout<Word>.size).map {
        Word(littleEndian: raw.loadUnaligned(fromByteOffset: $0, as: Word.self))
      }
    }
  }

  /// The record as bytes, for a backend to store: the digests (little-endian, 8 a key); with
  /// fingerprints, a first byte of 2, the digests, then the fingerprints (4 a key).
  public var bytes: [UInt8] {
    guard !self.fingerprints.isEmpty else { return Self.store(self.digests) }
    return [Self.withFingerprints] + Self.store(self.digests) + Self.store(self.fingerprints)
  }

  private static func store<Word: FixedWidthInteger>(_ words: [Word]) -> [UInt8] {
    // NB: copied whole, not a byte at a time: a window of 1,000 keys is 8 KB, written with every
    // save whose window changed.
    #if _endian(little)
    return words.withUnsafeBytes { Array($0) }
    #else
    return words.map(\.littleEndian).withUnsafeBytes { Array($0) }
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

  /// The digest of a request's fingerprint: 32-bit FNV-1a of its UTF-8, never 0 (which stands for
  /// no fingerprint).
  ///
  /// 32 bits: a reused key whose new request has the old one's digest (one chance in 4 × 10^9)
  /// is answered as a retry, as every reused key was without a fingerprint.
  public static func fingerprint(of request: String) -> UInt32 {
    var hash: UInt32 = 0x811c_9dc5
    for byte in request.utf8 {
      hash ^= UInt32(byte)
      hash = hash &* 0x0100_0193
    }
    return hash == 0 ? 1 : hash
  }
}

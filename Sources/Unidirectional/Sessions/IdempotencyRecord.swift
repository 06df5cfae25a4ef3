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

  /// The first word of a record that holds fingerprints (`IDEMPFP1` in ASCII).
  ///
  /// A record with fingerprints is words too: this mark, the number of keys, the fingerprints
  /// two to a word, then the digests. An earlier version of the library, which reads every word
  /// as a digest, so reads the digests as the newest keys, after a few that no request has: it
  /// keeps every key a retry may bring (the extra ones are the oldest, the first to leave its
  /// window) and only stops checking fingerprints. A rolling deploy is served by both versions.
  private static let fingerprintsMark: UInt64 = 0x3150_4650_4d45_4449

  /// Reads a record from ``bytes``; `nil` if they are not a whole number of words.
  ///
  /// Words that start with the mark but do not hold the count and fingerprints it announces are
  /// digests: a record an earlier version wrote back after reading one with fingerprints (its
  /// words as keys, then the keys it took since).
  public init?(bytes: [UInt8]) {
    guard bytes.count % 8 == 0 else { return nil }
    let words: [UInt64] = Self.load(bytes)
    guard words.count >= 2, words[0] == Self.fingerprintsMark, words[1] <= UInt64(words.count),
      words.count == 2 + (Int(words[1]) + 1) / 2 + Int(words[1])
    else {
      self.init(digests: words)
      return
    }
    let count = Int(words[1])
    let packed = (count + 1) / 2
    let fingerprints = words[2..<(2 + packed)].flatMap {
      [UInt32(truncatingIfNeeded: $0), UInt32($0 >> 32)]
    }
    self.init(
      digests: Array(words[(2 + packed)...]),
      fingerprints: Array(fingerprints.prefix(count))
    )
  }

  private static func load(_ bytes: [UInt8]) -> [UInt64] {
    bytes.withUnsafeBytes { raw in
      stride(from: 0, to: raw.count, by: 8).map {
        UInt64(littleEndian: raw.loadUnaligned(fromByteOffset: $0, as: UInt64.self))
      }
    }
  }

  /// The record as bytes, for a backend to store: little-endian words, the digests (one a key);
  /// with fingerprints, first the mark, the number of keys and the fingerprints, two to a word.
  public var bytes: [UInt8] {
    guard !self.fingerprints.isEmpty else { return Self.store(self.digests) }
    var words: [UInt64] = [Self.fingerprintsMark, UInt64(self.digests.count)]
    words.reserveCapacity(2 + (self.fingerprints.count + 1) / 2 + self.digests.count)
    for pair in stride(from: 0, to: self.fingerprints.count, by: 2) {
      let high = pair + 1 < self.fingerprints.count ? UInt64(self.fingerprints[pair + 1]) : 0
      words.append(UInt64(self.fingerprints[pair]) | high << 32)
    }
    words += self.digests
    return Self.store(words)
  }

  private static func store(_ words: [UInt64]) -> [UInt8] {
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

import Testing
import Unidirectional

private typealias Ledgers = StoreRegistry<String, SessionLedger>
private typealias LedgerStorage = InMemorySessionStorage<String, SessionLedger.State>

private func ledgers(_ storage: LedgerStorage, window: Int = 1_000) -> Ledgers {
  StoreRegistry(storage: storage, owner: "a", idempotencyWindow: window) { key in
    SessionLedger.State(key: key)
  } reducer: {
    SessionLedger(clock: ContinuousClock(), gate: Gate())
  }
}

/// A key reused for another request is refused, not answered as a retry (the IETF draft on the
/// `Idempotency-Key` header, Stripe).
@Suite(.timeLimit(.minutes(1))) struct IdempotencyFingerprintTests {
  @Test func aKeyReusedWithAnotherRequestIsRefusedAndNothingIsApplied() async throws {
    let storage = LedgerStorage()
    let registry = ledgers(storage)
    let first = try await registry.send(
      .append(1),
      to: "alice",
      idempotencyKey: "req-1",
      fingerprint: "append 1",
      reading: { $0.applied }
    )
    #expect(first == [1])
    let error = await #expect(throws: IdempotencyKeyReused.self) {
      try await registry.send(
        .append(2),
        to: "alice",
        idempotencyKey: "req-1",
        fingerprint: "append 2",
        reading: { $0.applied }
      )
    }
    #expect(error == IdempotencyKeyReused(key: "alice", idempotencyKey: "req-1"))
    #expect(error?.description.contains("'req-1' of session 'alice' was used before") == true)
    // The retry of the first request, with its fingerprint or with none, is still a retry.
    let retried = try await registry.send(
      .append(1),
      to: "alice",
      idempotencyKey: "req-1",
      fingerprint: "append 1",
      reading: { $0.applied }
    )
    try await registry.send(.append(1), to: "alice", idempotencyKey: "req-1")
    #expect(retried == [1])
    #expect(storage.storedState(for: "alice")?.applied == [1])
    let stored = storage.storedIdempotency(for: "alice")
    #expect(stored.digests == [IdempotencyRecord.digest(of: "req-1")])
    #expect(stored.fingerprints == [IdempotencyRecord.fingerprint(of: "append 1")])
    await registry.shutdown(gracePeriod: .seconds(1))
  }

  @Test func theFingerprintIsSavedWithTheKeyAndRefusesAReuseAfterReactivation() async throws {
    let storage = LedgerStorage()
    let registry = ledgers(storage)
    try await registry.send(.append(1), to: "alice", idempotencyKey: "k", fingerprint: "one")
    try await registry.passivate("alice")
    // Another instance over the same storage: the window comes back with its fingerprints.
    let other = ledgers(storage)
    await #expect(throws: IdempotencyKeyReused.self) {
      try await other.send(.append(2), to: "alice", idempotencyKey: "k", fingerprint: "two")
    }
    try await other.send(.append(1), to: "alice", idempotencyKey: "k", fingerprint: "one")
    #expect(storage.storedState(for: "alice")?.applied == [1])
    await other.shutdown(gracePeriod: .seconds(1))
    await registry.shutdown(gracePeriod: .seconds(1))
  }

  @Test func sendsOfOneKeyInFlightTogetherApplyOnlyTheFirstRequest() async throws {
    let storage = GatedStorage(LedgerStorage())
    let registry = StoreRegistry(storage: storage, owner: "a") { key in
      SessionLedger.State(key: key)
    } reducer: {
      SessionLedger(clock: ContinuousClock(), gate: Gate())
    }
    try await registry.send(.append(0), to: "alice")
    // The first send's save is held in flight; the others come meanwhile, and wait for it.
    storage.hold()
    let first = Task {
      try await registry.send(.append(1), to: "alice", idempotencyKey: "k", fingerprint: "one")
    }
    await storage.waitUntilHeld()
    let others = (0..<8).map { index in
      Task { () -> [Int]? in
        do {
          return try await registry.send(
            .append(index.isMultiple(of: 2) ? 1 : 2),
            to: "alice",
            idempotencyKey: "k",
            fingerprint: index.isMultiple(of: 2) ? "one" : "two",
            reading: { $0.applied }
          )
        } catch is IdempotencyKeyReused {
          return nil
        }
      }
    }
    storage.release()
    _ = try await first.value
    for (index, other) in others.enumerated() {
      #expect(try await other.value == (index.isMultiple(of: 2) ? [0, 1] : nil))
    }
    #expect(storage.base.storedState(for: "alice")?.applied == [0, 1])
    await registry.shutdown(gracePeriod: .seconds(1))
  }

  @Test func aKeyFirstSentWithoutAFingerprintIsAnsweredAsARetryWhateverComesLater() async throws {
    let storage = LedgerStorage()
    let registry = ledgers(storage)
    try await registry.send(.append(1), to: "alice", idempotencyKey: "k")
    let applied = try await registry.send(
      .append(2),
      to: "alice",
      idempotencyKey: "k",
      fingerprint: "append 2",
      reading: { $0.applied }
    )
    #expect(applied == [1])
    // Nothing fingerprinted: the record keeps the form earlier versions wrote.
    #expect(storage.storedIdempotency(for: "alice").fingerprints.isEmpty)
    #expect(storage.storedIdempotency(for: "alice").bytes.count == 8)
    await registry.shutdown(gracePeriod: .seconds(1))
  }

  @Test func theWindowKeepsEachKeysFingerprintAsOldKeysLeaveIt() async throws {
    let storage = LedgerStorage()
    let registry = ledgers(storage, window: 2)
    try await registry.send(.append(1), to: "alice", idempotencyKey: "a", fingerprint: "1")
    try await registry.send(.append(2), to: "alice", idempotencyKey: "b")
    try await registry.send(.append(3), to: "alice", idempotencyKey: "c", fingerprint: "3")
    let window = storage.storedIdempotency(for: "alice")
    #expect(window.digests == ["b", "c"].map(IdempotencyRecord.digest(of:)))
    #expect(window.fingerprints == [0, IdempotencyRecord.fingerprint(of: "3")])
    try await registry.send(.append(4), to: "alice", idempotencyKey: "d")
    // "c" is the only fingerprinted key left; once it leaves, the short form comes back.
    #expect(storage.storedIdempotency(for: "alice").fingerprints.count == 2)
    try await registry.send(.append(5), to: "alice", idempotencyKey: "e")
    #expect(storage.storedIdempotency(for: "alice").fingerprints.isEmpty)
    // "a" left the window: under it, a new request is applied.
    try await registry.send(.append(6), to: "alice", idempotencyKey: "a", fingerprint: "6")
    #expect(storage.storedState(for: "alice")?.applied == [1, 2, 3, 4, 5, 6])
    await registry.shutdown(gracePeriod: .seconds(1))
  }

  @Test func withoutStorageAReusedKeyIsRefusedToo() async throws {
    let registry = StoreRegistry<String, SessionLedger> {
      SessionLedger.State(key: $0)
    } reducer: {
      SessionLedger(clock: ContinuousClock(), gate: Gate())
    }
    try await registry.send(.append(1), to: "alice", idempotencyKey: "k", fingerprint: "one")
    await #expect(throws: IdempotencyKeyReused.self) {
      try await registry.send(.append(2), to: "alice", idempotencyKey: "k", fingerprint: "two")
    }
    let applied = try await registry.send(
      .append(1),
      to: "alice",
      idempotencyKey: "k",
      fingerprint: "one",
      reading: { $0.applied }
    )
    #expect(applied == [1])
    await registry.shutdown(gracePeriod: .seconds(1))
  }
}

@Suite struct FingerprintedRecordTests {
  /// Little-endian bytes of `words`.
  private func bytes(_ words: [UInt64]) -> [UInt8] {
    words.flatMap { word in (0..<8).map { UInt8(truncatingIfNeeded: word >> (8 * $0)) } }
  }

  @Test func aRecordWithFingerprintsRoundTripsInItsOwnFormAndTheOldFormStillReads() {
    let digests: [UInt64] = [0x0102_0304_0506_0708, 0xff, 0xabc]
    let record = IdempotencyRecord(digests: digests, fingerprints: [0, 7, 9])
    let mark: UInt64 = 0x3150_4650_4d45_4449
    #expect(record.bytes == bytes([mark, 3, 7 << 32, 9] + digests))
    #expect(Array(record.bytes.prefix(8)) == Array("IDEMPFP1".utf8))
    #expect(IdempotencyRecord(bytes: record.bytes) == record)
    // The form earlier versions wrote: digests only.
    let old = IdempotencyRecord(bytes: [1, 0, 0, 0, 0, 0, 0, 0x80])
    #expect(old?.digests == [0x8000_0000_0000_0001])
    #expect(old?.fingerprints == [])
    // Fingerprints that are all "none" are no fingerprints.
    #expect(IdempotencyRecord(digests: [1], fingerprints: [0]).fingerprints == [])
    // Stable across processes and versions: 32-bit FNV-1a's published value for "a".
    #expect(IdempotencyRecord.fingerprint(of: "a") == 0xe40c_292c)
  }

  @Test func anEarlierVersionReadsEveryKeyOfARecordWithFingerprintsAsItsNewest() {
    // An earlier version reads every word as a digest, oldest first, and keeps the newest of
    // them: the keys come last, so a window as full as its capacity keeps them all.
    let digests = (1...1_000).map { UInt64($0) &* 0x9e37_79b9_7f4a_7c15 }
    let record = IdempotencyRecord(
      digests: digests,
      fingerprints: digests.map { UInt32(truncatingIfNeeded: $0) | 1 }
    )
    let asEarlierVersionsRead = IdempotencyRecord(
      digests: stride(from: 0, to: record.bytes.count, by: 8).map { offset in
        (0..<8).reduce(UInt64(0)) { $0 | UInt64(record.bytes[offset + $1]) << (8 * $1) }
      }
    )
    #expect(asEarlierVersionsRead.digests.count == 2 + 500 + 1_000)
    #expect(Array(asEarlierVersionsRead.digests.suffix(1_000)) == digests)
  }

  @Test func bytesThatAreNotWholeWordsAreRefused() {
    let record = IdempotencyRecord(digests: [5, 6, 7], fingerprints: [1, 2, 3])
    #expect(IdempotencyRecord(bytes: Array(record.bytes.dropLast())) == nil)
    #expect(IdempotencyRecord(bytes: record.bytes + [0]) == nil)
  }

  @Test func aRecordAnEarlierVersionWroteBackReadsAsItsKeys() throws {
    // An earlier version read a record with fingerprints as keys, took one more, and wrote it
    // back as digests: it starts with the mark but holds no fingerprints now.
    let record = IdempotencyRecord(digests: [5, 6, 7], fingerprints: [1, 2, 3])
    let mark: UInt64 = 0x3150_4650_4d45_4449
    let writtenBack: [UInt64] = [mark, 3, 2 << 32 | 1, 3, 5, 6, 7, 8]
    let read = try #require(IdempotencyRecord(bytes: bytes(writtenBack)))
    #expect(read.digests == writtenBack)
    #expect(read.fingerprints == [])
    // Shortened at the front by its window, or with the count gone, the same.
    #expect(IdempotencyRecord(bytes: bytes([mark]))?.digests == [mark])
    #expect(IdempotencyRecord(bytes: bytes([mark, .max]))?.digests == [mark, .max])
    #expect(IdempotencyRecord(bytes: Array(record.bytes.dropLast(8)))?.fingerprints == [])
    #expect(IdempotencyRecord(bytes: bytes([mark, 0]))?.digests == [])
  }

  @Test func aSessionAnEarlierVersionSavedAfterAFingerprintedOneIsServed() async throws {
    // The rolling deploy: this version saves a fingerprinted key, an earlier one reads the record
    // as keys and saves another key, and this version reads that record back.
    let storage = LedgerStorage()
    let registry = ledgers(storage)
    try await registry.send(.append(1), to: "alice", idempotencyKey: "a", fingerprint: "one")
    try await registry.passivate("alice")
    let stored = storage.storedIdempotency(for: "alice")
    let asEarlierVersionsWrote = IdempotencyRecord(
      digests: stride(from: 0, to: stored.bytes.count, by: 8).map { offset in
        (0..<8).reduce(UInt64(0)) { $0 | UInt64(stored.bytes[offset + $1]) << (8 * $1) }
      } + [IdempotencyRecord.digest(of: "b")]
    )
    guard
      case .acquired(let token, _, _) = try await storage.acquire(
        "alice",
        owner: "old",
        address: nil
      )
    else {
      Issue.record("the earlier version could not take the lease")
      return
    }
    let saved = try await storage.save(
      [
        SessionWrite(
          key: "alice",
          state: SessionLedger.State(key: "alice", applied: [1, 2]),
          token: token,
          idempotency: asEarlierVersionsWrote
        )
      ],
      owner: "old"
    )
    #expect(saved == [.saved])
    try await storage.release([SessionLease(key: "alice", token: token)], owner: "old")
    let again = ledgers(storage)
    let applied = try await again.send(
      .append(2),
      to: "alice",
      idempotencyKey: "b",
      fingerprint: "two",
      reading: { $0.applied }
    )
    #expect(applied == [1, 2])
    try await again.send(.append(1), to: "alice", idempotencyKey: "a", fingerprint: "one")
    #expect(storage.storedState(for: "alice")?.applied == [1, 2])
    await again.shutdown(gracePeriod: .seconds(1))
    await registry.shutdown(gracePeriod: .seconds(1))
  }

}

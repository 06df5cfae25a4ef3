import Foundation
import Testing
import Unidirectional

private typealias Ledgers = StoreRegistry<String, SessionLedger>
private typealias LedgerStorage = InMemorySessionStorage<String, SessionLedger.State>

private func registry(
  _ owner: String,
  _ storage: some SessionStorage<String, SessionLedger.State>,
  idempotencyWindow: Int = 1_000
) -> Ledgers {
  StoreRegistry(storage: storage, owner: owner, idempotencyWindow: idempotencyWindow) { key in
    SessionLedger.State(key: key)
  } reducer: {
    SessionLedger(clock: ContinuousClock(), gate: Gate())
  }
}

/// The record of `keys`, oldest first.
func record(_ keys: String...) -> IdempotencyRecord {
  IdempotencyRecord(digests: keys.map(IdempotencyRecord.digest(of:)))
}

/// The storage as a node that died sees it: its leases are never renewed.
private struct RenewsNothing: PassThroughStorage {
  let base: LedgerStorage

  func renew(_ leases: [SessionLease<String>], owner: String) async throws -> [String] {
    throw Dead()
  }

  struct Dead: Error {}
}

private struct DiskFull: Error, CustomStringConvertible {
  var description: String { "disk full" }
}

/// Idempotent sends: a retry of an applied send is never reduced twice.
@Suite(.timeLimit(.minutes(1))) struct IdempotentSendTests {
  @Test func aRetryWithTheSameKeyIsNotReducedAgainAndReadsTheState() async throws {
    let storage = LedgerStorage()
    let ledgers = registry("a", storage)
    let first = try await ledgers.send(
      .append(1),
      to: "alice",
      idempotencyKey: "req-1",
      reading: { $0.applied }
    )
    let retry = try await ledgers.send(
      .append(1),
      to: "alice",
      idempotencyKey: "req-1",
      reading: { $0.applied }
    )
    #expect(first == [1])
    #expect(retry == [1])
    try await ledgers.send(.append(2), to: "alice", idempotencyKey: "req-2")
    try await ledgers.send(.append(2), to: "alice", idempotencyKey: "req-2")
    #expect(storage.storedState(for: "alice")?.applied == [1, 2])
    // The keys are saved with the state, in the same write.
    #expect(storage.storedIdempotency(for: "alice") == record("req-1", "req-2"))
    // A key is per session: the same key for another session is another request.
    try await ledgers.send(.append(9), to: "bob", idempotencyKey: "req-1")
    #expect(storage.storedState(for: "bob")?.applied == [9])
    await ledgers.shutdown(gracePeriod: .seconds(1))
  }

  @Test func aRetryOnAnotherInstanceAfterACrashIsNotReducedAgain() async throws {
    let time = TestClock()
    let storage = LedgerStorage(clock: time, leaseDuration: .seconds(10))
    // NB: a dead process renews nothing: without this, node A's renewals (on the real clock, every
    // 3.3 s) kept its lease whenever the test took that long, as it can under ThreadSanitizer.
    let crashed = registry("node-a", RenewsNothing(base: storage))
    try await crashed.send(.append(1), to: "alice", idempotencyKey: "req-1")
    // Node A dies without passivating; its lease expires on the storage's time.
    await time.advance(by: .seconds(11))
    let survivor = registry("node-b", storage)
    let applied = try await survivor.send(
      .append(1),
      to: "alice",
      idempotencyKey: "req-1",
      reading: { $0.applied }
    )
    #expect(applied == [1])
    #expect(storage.storedState(for: "alice")?.applied == [1])
    await survivor.shutdown(gracePeriod: .seconds(1))
    await crashed.shutdown(gracePeriod: .seconds(1))
  }

  @Test func concurrentRetriesOfOneKeyApplyItOnce() async throws {
    let storage = GatedStorage(LedgerStorage())
    let ledgers = registry("a", storage)
    try await ledgers.send(.append(0), to: "alice")
    // The first send's save is held in flight; its retries arrive meanwhile.
    storage.hold()
    let first = Task { _ = try await ledgers.send(.append(1), to: "alice", idempotencyKey: "k") }
    await storage.waitUntilHeld()
    let retries = (0..<8).map { _ in
      Task {
        try await ledgers.send(
          .append(1),
          to: "alice",
          idempotencyKey: "k",
          reading: { $0.applied }
        )
      }
    }
    storage.release()
    try await first.value
    for retry in retries { #expect(try await retry.value == [0, 1]) }
    #expect(storage.base.storedState(for: "alice")?.applied == [0, 1])
    await ledgers.shutdown(gracePeriod: .seconds(1))
  }

  @Test func aSendWhoseSaveFailedIsAppliedByItsRetry() async throws {
    let storage = LedgerStorage()
    let ledgers = registry("a", storage)
    try await ledgers.send(.append(1), to: "alice")
    storage.failOperations(with: DiskFull())
    await #expect(throws: SessionError.self) {
      try await ledgers.send(.append(2), to: "alice", idempotencyKey: "req-2")
    }
    storage.failOperations(with: nil)
    let applied = try await ledgers.send(
      .append(2),
      to: "alice",
      idempotencyKey: "req-2",
      reading: { $0.applied }
    )
    #expect(applied == [1, 2])
    #expect(storage.storedState(for: "alice")?.applied == [1, 2])
    await ledgers.shutdown(gracePeriod: .seconds(1))
  }

  @Test func theWindowKeepsTheNewestKeysAndSurvivesPassivation() async throws {
    let storage = LedgerStorage()
    let ledgers = registry("a", storage, idempotencyWindow: 2)
    for (value, key) in [(1, "a"), (2, "b"), (3, "c")] {
      try await ledgers.send(.append(value), to: "alice", idempotencyKey: key)
    }
    #expect(storage.storedIdempotency(for: "alice") == record("b", "c"))
    try await ledgers.passivate("alice")
    // Reloaded with its state: "c" is still held, "a" has left the window.
    try await ledgers.send(.append(3), to: "alice", idempotencyKey: "c")
    try await ledgers.send(.append(1), to: "alice", idempotencyKey: "a")
    #expect(storage.storedState(for: "alice")?.applied == [1, 2, 3, 1])
    await ledgers.shutdown(gracePeriod: .seconds(1))
  }

  @Test func withoutStorageAKeyIsHeldInMemory() async throws {
    let ledgers = StoreRegistry<String, SessionLedger> {
      SessionLedger.State(key: $0)
    } reducer: {
      SessionLedger(clock: ContinuousClock(), gate: Gate())
    }
    try await ledgers.send(.append(1), to: "alice", idempotencyKey: "k")
    let applied = try await ledgers.send(
      .append(1),
      to: "alice",
      idempotencyKey: "k",
      reading: { $0.applied }
    )
    #expect(applied == [1])
    await ledgers.shutdown(gracePeriod: .seconds(1))
  }
}

/// Erasure: gone from memory and storage before `erase` returns.
@Suite(.timeLimit(.minutes(1))) struct ErasureTests {
  @Test func erasingALiveSessionRemovesItsRowAndALaterSendStartsAfresh() async throws {
    let storage = LedgerStorage()
    let ledgers = registry("a", storage)
    try await ledgers.send(.append(1), to: "alice", idempotencyKey: "req-1")
    try await ledgers.send(.append(1), to: "bob")
    try await ledgers.erase("alice")
    #expect(!storage.hasRow(for: "alice"))
    #expect(await ledgers.liveStore(for: "alice") == nil)
    #expect(storage.storedState(for: "bob")?.applied == [1])
    // The erased session's idempotency keys went with it: the same request applies anew.
    let applied = try await ledgers.send(
      .append(1),
      to: "alice",
      idempotencyKey: "req-1",
      reading: { $0.applied }
    )
    #expect(applied == [1])
    await ledgers.shutdown(gracePeriod: .seconds(1))
  }

  @Test func erasingASessionThatIsNotLiveOrWasNeverSavedSucceeds() async throws {
    let storage = LedgerStorage()
    let ledgers = registry("a", storage)
    try await ledgers.send(.append(1), to: "alice")
    try await ledgers.passivate("alice")
    #expect(storage.hasRow(for: "alice"))
    try await ledgers.erase("alice")
    #expect(!storage.hasRow(for: "alice"))
    try await ledgers.erase("never-seen")
    #expect(!storage.hasRow(for: "never-seen"))
    await ledgers.shutdown(gracePeriod: .seconds(1))
  }

  @Test func aStateThatNoLongerReadsCanStillBeErased() async throws {
    let storage = LedgerStorage()
    storage.store(SessionLedger.State(key: "alice", applied: [7]), for: "alice")
    storage.makeUnreadable("alice")
    let ledgers = registry("a", storage)
    try await ledgers.erase("alice")
    #expect(!storage.hasRow(for: "alice"))
    await ledgers.shutdown(gracePeriod: .seconds(1))
  }

  @Test func anotherInstancesLiveSessionIsNotErasedAndTheOwnerIsNamed() async throws {
    let time = TestClock()
    let storage = LedgerStorage(clock: time)
    let a = registry("node-a", storage)
    a.advertisedAddress = "http://127.0.0.1:9001"
    let b = registry("node-b", storage)
    try await a.send(.append(1), to: "alice")
    let error = await #expect(throws: SessionError.self) { try await b.erase("alice") }
    guard case .ownershipLost(_, let message) = error else {
      Issue.record("expected .ownershipLost, got \(String(describing: error))")
      return
    }
    #expect(message.contains("node-a"))
    // Learned with its address, as a send would learn it: a request can be forwarded there.
    #expect(b.owner(of: "alice")?.name == "node-a")
    #expect(b.owner(of: "alice")?.address == "http://127.0.0.1:9001")
    #expect(b.liveCount == 0)
    #expect(storage.storedState(for: "alice")?.applied == [1])
    try await a.erase("alice")
    #expect(!storage.hasRow(for: "alice"))
    await a.shutdown(gracePeriod: .seconds(1))
    await b.shutdown(gracePeriod: .seconds(1))
  }

  @Test func aLeaseLetGoWhileTheErasureLookedIsTakenAndTheSessionErased() async throws {
    let storage = LedgerStorage()
    storage.store(SessionLedger.State(key: "alice", applied: [7]), for: "alice")
    // The first erase meets a lease that its holder lets go before the registry looks at it.
    let racing = FirstEraseMeetsALease(storage)
    let ledgers = registry("a", racing)
    try await ledgers.erase("alice")
    #expect(!storage.hasRow(for: "alice"))
    #expect(racing.erases == 2)
    await ledgers.shutdown(gracePeriod: .seconds(1))
  }

  @Test func aFailedErasureErasesNothingAndCanBeRetried() async throws {
    let storage = LedgerStorage()
    let ledgers = registry("a", storage)
    try await ledgers.send(.append(1), to: "alice")
    storage.failOperations(with: DiskFull())
    let error = await #expect(throws: SessionError.self) { try await ledgers.erase("alice") }
    #expect(error?.message.contains("disk full") == true)
    storage.failOperations(with: nil)
    #expect(storage.storedState(for: "alice")?.applied == [1])
    try await ledgers.erase("alice")
    #expect(!storage.hasRow(for: "alice"))
    await ledgers.shutdown(gracePeriod: .seconds(1))
  }

  @Test func erasingAfterShutdownIsRefused() async throws {
    let ledgers = registry("a", LedgerStorage())
    await ledgers.shutdown(gracePeriod: .seconds(1))
    await #expect(throws: SessionError.self) { try await ledgers.erase("alice") }
  }
}

/// One key's failure stays its own; memory never runs ahead of storage; reads write nothing.
@Suite(.timeLimit(.minutes(1))) struct FailureIsolationTests {
  @Test func aRefusedSaveFailsOnlyItsKeyAndItsStoreGoesBackToTheLastSavedState() async throws {
    let storage = LedgerStorage()
    let ledgers = registry("a", storage)
    try await ledgers.send(.append(1), to: "big")
    storage.refuseSaves(of: "big", reason: "the state is past the size limit")
    // The big key's send and 16 others' share batches; only the big one fails.
    try await withThrowingTaskGroup(of: Void.self) { group in
      for index in 0..<16 {
        group.addTask { try await ledgers.send(.append(index), to: "k\(index)") }
      }
      group.addTask {
        let error = await #expect(throws: SessionError.self) {
          try await ledgers.send(.append(2), to: "big")
        }
        guard case .storageFailed(let key, let message) = error else {
          Issue.record("expected .storageFailed, got \(String(describing: error))")
          return
        }
        #expect(key == "big")
        #expect(message.contains("size limit"))
      }
      try await group.waitForAll()
    }
    for index in 0..<16 { #expect(storage.storedState(for: "k\(index)")?.applied == [index]) }
    storage.refuseSaves(of: "big", reason: nil)
    // The store that held the refused 2 was discarded: the big key reads as its last save.
    #expect(try await ledgers.state(of: "big").applied == [1])
    try await ledgers.send(.append(3), to: "big")
    #expect(storage.storedState(for: "big")?.applied == [1, 3])
    await ledgers.shutdown(gracePeriod: .seconds(1))
  }

  @Test func statesQueuedBehindAFailedSaveFailTooAndAreNeverWritten() async throws {
    let gated = GatedStorage(LedgerStorage())
    let ledgers = registry("a", gated)
    try await ledgers.send(.append(1), to: "big")
    gated.base.refuseSaves(of: "big", reason: "too large")
    gated.hold()
    let refused = Task { _ = try await ledgers.send(.append(2), to: "big") }
    await gated.waitUntilHeld()
    // Reduced on the same store, so it includes the 2 storage is about to refuse.
    let queued = Task { _ = try await ledgers.send(.append(3), to: "big") }
    await ledgers.waitUntilSavesQueued(1)
    gated.release()
    await #expect(throws: SessionError.self) { try await refused.value }
    await #expect(throws: SessionError.self) { try await queued.value }
    gated.base.refuseSaves(of: "big", reason: nil)
    #expect(gated.base.storedState(for: "big")?.applied == [1])
    #expect(try await ledgers.state(of: "big").applied == [1])
    await ledgers.shutdown(gracePeriod: .seconds(1))
  }

  @Test func readingAKeyNeverSavedWritesNothingAndActivatesNothing() async throws {
    let storage = LedgerStorage()
    let ledgers = registry("a", storage)
    #expect(try await ledgers.state(of: "nobody") == SessionLedger.State(key: "nobody"))
    #expect(!storage.hasRow(for: "nobody"))
    #expect(ledgers.liveCount == 0)
    // A key with a saved state activates on a read, as before.
    storage.store(SessionLedger.State(key: "alice", applied: [4]), for: "alice")
    #expect(try await ledgers.state(of: "alice").applied == [4])
    #expect(ledgers.liveCount == 1)
    await ledgers.shutdown(gracePeriod: .seconds(1))
  }

  @Test func whileStorageRefusesEveryWriteASavedKeyIsStillRead() async throws {
    // A full disk: reads work, leases and saves do not.
    let storage = WritesRefused(base: LedgerStorage())
    storage.base.store(SessionLedger.State(key: "alice", applied: [4]), for: "alice")
    let ledgers = registry("a", storage)
    #expect(try await ledgers.state(of: "alice").applied == [4])
    #expect(ledgers.liveCount == 0)
    let refused = await #expect(throws: SessionError.self) {
      try await ledgers.send(.append(5), to: "alice")
    }
    #expect(refused?.description.contains("disk full") == true)
    #expect(try await ledgers.state(of: "alice").applied == [4])
    await ledgers.shutdown(gracePeriod: .seconds(1))
  }

  @Test func aKeyActivatedButNeverSavedLeavesNoRowOnceItsLeaseIsReleased() async throws {
    let storage = LedgerStorage()
    let ledgers = registry("a", storage)
    storage.refuseSaves(of: "ghost", reason: "too large")
    // Activation took the lease (a row); the first save is refused; the store is discarded and
    // its lease released, which removes a row that never held a state.
    await #expect(throws: SessionError.self) { try await ledgers.send(.append(1), to: "ghost") }
    // (The discarded store ends in a task of its own; shutting down waits for it.)
    await ledgers.shutdown(gracePeriod: .seconds(1))
    #expect(!storage.hasRow(for: "ghost"))
  }

  @Test func aKeyOnlyWatchedLeavesNoRowOncePassivatedOrShutDown() async throws {
    let storage = LedgerStorage()
    let ledgers = registry("a", storage)
    // A watcher activates the store (its lease is a row) but sends nothing.
    _ = try await ledgers.activatedStore(for: "ghost")
    _ = try await ledgers.activatedStore(for: "spectre")
    #expect(storage.hasRow(for: "ghost"))
    try await ledgers.passivate("ghost")
    #expect(!storage.hasRow(for: "ghost"))
    await ledgers.shutdown(gracePeriod: .seconds(1))
    #expect(!storage.hasRow(for: "spectre"))
  }

  @Test func anUnreadableStateFailsOnlyItsKeyOnReadsAndSends() async throws {
    let storage = LedgerStorage()
    storage.store(SessionLedger.State(key: "alice", applied: [7]), for: "alice")
    storage.makeUnreadable("alice")
    let ledgers = registry("a", storage)
    for _ in 0..<2 {
      let error = await #expect(throws: SessionError.self) { try await ledgers.state(of: "alice") }
      guard case .stateUnreadable(let key, _, _) = error else {
        Issue.record("expected .stateUnreadable, got \(String(describing: error))")
        return
      }
      #expect(key == "alice")
    }
    #expect(storage.storedState(for: "alice")?.applied == [7])
    try await ledgers.send(.append(1), to: "bob")
    await ledgers.shutdown(gracePeriod: .seconds(1))
  }
}

/// Where a key's owner is: recorded with its lease, learned by the other instances.
@Suite(.timeLimit(.minutes(1))) struct SessionOwnerTests {
  @Test func anotherInstanceLearnsTheOwnersAddressAndStillAsksStorageEachTime() async throws {
    let time = TestClock()
    let storage = LedgerStorage(clock: time, leaseDuration: .seconds(10))
    let a = registry("node-a", storage)
    let b = registry("node-b", storage)
    a.advertisedAddress = "http://127.0.0.1:8001"
    #expect(a.advertisedAddress == "http://127.0.0.1:8001")
    try await a.send(.append(1), to: "alice")
    await time.advance(by: .seconds(4))
    let error = await #expect(throws: SessionError.self) {
      try await b.send(.append(2), to: "alice")
    }
    #expect(error?.message.contains("'node-a' at http://127.0.0.1:8001") == true)
    #expect(error?.message.contains("6 s left") == true)
    #expect(
      b.owner(of: "alice")
        == SessionOwner(name: "node-a", address: "http://127.0.0.1:8001", leaseLeft: .seconds(6))
    )
    // A lets the key go: B's next send asks the storage again, not its hint, and takes it.
    try await a.passivate("alice")
    let applied = try await b.send(.append(2), to: "alice", reading: { $0.applied })
    #expect(applied == [1, 2])
    #expect(b.owner(of: "alice") == nil)
    await a.shutdown(gracePeriod: .seconds(1))
    await b.shutdown(gracePeriod: .seconds(1))
  }

  @Test func anOwnerWithNoAddressIsNamedWithoutOneAndCanBeForgotten() async throws {
    let storage = LedgerStorage()
    let a = registry("node-a", storage)
    let b = registry("node-b", storage)
    try await a.send(.append(1), to: "alice")
    await #expect(throws: SessionError.self) { try await b.send(.append(2), to: "alice") }
    #expect(b.owner(of: "alice")?.address == nil)
    b.forgetOwner(of: "alice")
    #expect(b.owner(of: "alice") == nil)
    #expect(SessionOwner.seconds(.milliseconds(1)) == 1)
    #expect(SessionOwner.seconds(.milliseconds(2_500)) == 3)
    await a.shutdown(gracePeriod: .seconds(1))
    await b.shutdown(gracePeriod: .seconds(1))
  }
}

@Suite struct IdempotencyRecordTests {
  @Test func aRecordRoundTripsThroughItsBytesAndRefusesAPartialDigest() {
    let original = record("req-1", "req-2", "a much longer key, with UTF-8: ✓")
    #expect(original.bytes.count == 24)
    #expect(IdempotencyRecord(bytes: original.bytes) == original)
    #expect(IdempotencyRecord(bytes: Array(original.bytes.dropLast())) == nil)
    #expect(original.contains("req-2"))
    #expect(!original.contains("req-3"))
    // Stable across processes and versions: FNV-1a's published value for "a".
    #expect(IdempotencyRecord.digest(of: "a") == 0xaf63_dc4c_8601_ec8c)
  }

  @Test func aRecordsBytesAreLittleEndianDigestsAsEarlierVersionsStoredThem() {
    let record = IdempotencyRecord(digests: [0x0102_0304_0506_0708, 0xff])
    #expect(record.bytes == [8, 7, 6, 5, 4, 3, 2, 1, 0xff, 0, 0, 0, 0, 0, 0, 0])
    #expect(
      IdempotencyRecord(bytes: [1, 0, 0, 0, 0, 0, 0, 0x80])?.digests == [0x8000_0000_0000_0001]
    )
    #expect(IdempotencyRecord(bytes: [])?.digests == [])
  }

  @Test func aSaveWritesTheWindowOnlyWhenItChanged() async throws {
    let storage = LedgerStorage()
    let ledgers = registry("a", storage)
    try await ledgers.send(.append(1), to: "alice", idempotencyKey: "k1")
    #expect(storage.storedIdempotency(for: "alice") == record("k1"))
    // Plain sends carry no window: the stored one stays.
    try await ledgers.send(.append(2), to: "alice")
    try await ledgers.passivate("alice")
    #expect(storage.storedIdempotency(for: "alice") == record("k1"))
    try await ledgers.send(.append(1), to: "alice", idempotencyKey: "k1")
    #expect(storage.storedState(for: "alice")?.applied == [1, 2])
    await ledgers.shutdown(gracePeriod: .seconds(1))
  }
}

/// Collects the issues reported to a store's observer.
private final class IssueLog: StoreObserver, Sendable {
  typealias State = SessionLedger.State
  typealias Action = SessionLedger.Action
  let issues = LockIsolated<[String]>([])
  func issueReported(_ issue: ReportedIssue) { self.issues.withValue { $0.append(issue.message) } }
}

@Suite(.timeLimit(.minutes(1))) struct UnreadableStateReportTests {
  @Test func anUnreadableStateIsReportedToTheKeysObserver() async throws {
    let storage = LedgerStorage()
    storage.store(SessionLedger.State(key: "alice", applied: [7]), for: "alice")
    storage.makeUnreadable("alice")
    let log = IssueLog()
    let ledgers = StoreRegistry(storage: storage, owner: "a", observer: log) {
      SessionLedger.State(key: $0)
    } reducer: {
      SessionLedger(clock: ContinuousClock(), gate: Gate())
    }
    await #expect(throws: SessionError.self) { try await ledgers.send(.append(1), to: "alice") }
    #expect(log.issues.value.count == 1)
    #expect(log.issues.value.first?.contains("alice") == true)
    #expect(log.issues.value.first?.contains("unreadable") == true)
    await ledgers.shutdown(gracePeriod: .seconds(1))
  }
}

/// Stored states from older and newer versions of the app.
@Suite struct StoredStateTests {
  struct V1: Codable, Equatable { var count: Int }
  struct V2: Codable, Equatable { var total: Int }

  private func stored(_ version: Int, _ json: String) -> StoredState {
    StoredState(version: version, bytes: Array(json.utf8)) { type, bytes in
      try JSONDecoder().decode(type, from: Data(bytes))
    }
  }

  private let upgrade: @Sendable (StoredState) throws -> V2 = { stored in
    V2(total: try stored.decode(V1.self).count)
  }

  @Test func theCurrentVersionDecodesAndAnOlderOneMigrates() throws {
    let current = try stored(2, #"{"total": 5}"#)
      .read(as: V2.self, key: "k", currentVersion: 2, migrate: self.upgrade)
    #expect(current == V2(total: 5))
    let migrated = try stored(1, #"{"count": 3}"#)
      .read(as: V2.self, key: "k", currentVersion: 2, migrate: self.upgrade)
    #expect(migrated == V2(total: 3))
  }

  @Test func aNewerVersionIsRefusedNamingBothVersions() {
    let error = #expect(throws: SessionStateUnreadable.self) {
      try stored(3, #"{"total": 5}"#)
        .read(as: V2.self, key: "k", currentVersion: 2, migrate: self.upgrade)
    }
    #expect(error?.key == "k")
    #expect(error?.storedVersion == 3)
    #expect(error?.description.contains("newer version") == true)
  }

  @Test func aMigrationThatThrowsOrIsMissingIsRefusedNamingTheCause() {
    let failing = #expect(throws: SessionStateUnreadable.self) {
      try stored(1, #"{"count": "three"}"#)
        .read(as: V2.self, key: "k", currentVersion: 2, migrate: self.upgrade)
    }
    #expect(failing?.reason.contains("migrating") == true)
    let missing = #expect(throws: SessionStateUnreadable.self) {
      try stored(1, #"{"count": 3}"#).read(as: V2.self, key: "k", currentVersion: 2, migrate: nil)
    }
    #expect(missing?.reason.contains("no migration") == true)
    let garbage = #expect(throws: SessionStateUnreadable.self) {
      try stored(2, "not json").read(as: V2.self, key: "k", currentVersion: 2, migrate: nil)
    }
    #expect(garbage?.reason.contains("decoding") == true)
  }
}

/// A storage whose first erase answers that another owner holds the lease, though none does (its
/// holder let it go in between).
private final class FirstEraseMeetsALease: PassThroughStorage {
  let base: LedgerStorage
  private let count = LockIsolated(0)

  init(_ base: LedgerStorage) { self.base = base }

  var erases: Int { self.count.value }

  func erase(_ key: String, token: UInt64?, owner: String) async throws -> SessionSaveResult {
    let first = self.count.withValue { count in
      count += 1
      return count == 1
    }
    if first { return .staleToken(currentOwner: "gone") }
    return try await self.base.erase(key, token: token, owner: owner)
  }
}

/// A storage whose every write fails (a full disk) while reads work.
private struct WritesRefused: PassThroughStorage {
  let base: LedgerStorage

  func acquire(
    _ key: String,
    owner: String,
    address: String?
  ) async throws -> SessionAcquisition<SessionLedger.State> {
    throw DiskFull()
  }

  func save(
    _ writes: [SessionWrite<String, SessionLedger.State>],
    owner: String
  ) async throws -> [SessionSaveResult] {
    throw DiskFull()
  }
}

import Testing
import Unidirectional

/// A registry's batch is taken when the storage asks for it (`save(owner:taking:)`), not when the
/// save begins: what arrives meanwhile goes in, and a storage that fails before asking still
/// answers the batch's senders.
@Suite struct LateTakeTests {
  @Test func aStorageThatTakesLateSavesEveryStateThatArrivedBeforeItAsked() async throws {
    let storage = InMemorySessionStorage<String, SessionLedger.State>(clock: TestClock())
    let late = LateTakingStorage(storage)
    let registry = ledgers(over: late)
    try await registry.send(.append(0), to: "k0")
    late.hold()
    let first = Task { try await registry.send(.append(1), to: "k0") }
    // The save has begun and has not taken its batch: ten more keys' states queue with k0's.
    await late.waitUntilHeld()
    try await withThrowingTaskGroup(of: Void.self) { group in
      for index in 1...10 {
        group.addTask { try await registry.send(.append(index), to: "k\(index)") }
      }
      await registry.waitUntilSavesQueued(11)
      late.release()
      try await group.waitForAll()
    }
    _ = try await first.value
    // The first save, then one for all eleven: a batch taken as the save began held k0's alone.
    #expect(registry.saveStatistics == SaveStatistics(saves: 2, states: 12, sends: 12))
    #expect(storage.storedState(for: "k0")?.applied == [0, 1])
    #expect(storage.storedState(for: "k7")?.applied == [7])
    // Asked again, the queue gives a save nothing more.
    #expect(late.secondTakes == [0, 0])
    await registry.shutdown(gracePeriod: .seconds(1))
  }

  @Test func aStorageThatFailsBeforeAskingFailsTheSendsOfTheBatchItWouldHaveTaken() async throws {
    let storage = InMemorySessionStorage<String, SessionLedger.State>(clock: TestClock())
    let late = LateTakingStorage(storage)
    let registry = ledgers(over: late)
    try await registry.send(.append(0), to: "k0")
    late.mode.withValue { $0 = .failBeforeTaking }
    let error = await #expect(throws: SessionError.self) {
      try await registry.send(.append(1), to: "k0")
    }
    #expect(error?.message.contains("the disk is gone (DiskGone)") == true)
    // The store was discarded: the next send starts from the last saved state, and is saved.
    late.mode.withValue { $0 = .take }
    try await registry.send(.append(2), to: "k0")
    #expect(storage.storedState(for: "k0")?.applied == [0, 2])
    await registry.shutdown(gracePeriod: .seconds(1))
  }

  @Test func aStorageThatReturnsWithoutAskingFailsTheBatchItLeftUnsaved() async throws {
    let storage = InMemorySessionStorage<String, SessionLedger.State>(clock: TestClock())
    let late = LateTakingStorage(storage)
    let registry = ledgers(over: late)
    late.mode.withValue { $0 = .returnWithoutTaking }
    let error = await #expect(throws: SessionError.self) {
      try await registry.send(.append(1), to: "k0")
    }
    #expect(error?.message.contains("without taking its batch") == true)
    #expect(storage.storedState(for: "k0") == nil)
    late.mode.withValue { $0 = .take }
    try await registry.send(.append(2), to: "k0")
    #expect(storage.storedState(for: "k0")?.applied == [2])
    await registry.shutdown(gracePeriod: .seconds(1))
  }
}

private func ledgers(
  over storage: LateTakingStorage<String, SessionLedger.State>
) -> StoreRegistry<String, SessionLedger> {
  StoreRegistry(storage: storage, owner: "a", clock: TestClock()) { key in
    SessionLedger.State(key: key)
  } reducer: {
    SessionLedger(clock: ContinuousClock(), gate: Gate())
  }
}

/// A storage that takes its batch only when asked to, as a storage with one writer does: its
/// saves can be held before they take, fail before they take, or return without taking.
final class LateTakingStorage<Key: Hashable & Sendable, State: Sendable>: PassThroughStorage {
  enum Mode: Sendable {
    case take
    case failBeforeTaking
    case returnWithoutTaking
  }

  struct DiskGone: Error, CustomStringConvertible {
    var description: String { "the disk is gone" }
  }

  let base: InMemorySessionStorage<Key, State>
  let mode = LockIsolated(Mode.take)
  /// Holds saves before they take their batch.
  private let gated: GatedStorage<Key, State>
  private let seconds = LockIsolated([Int]())

  init(_ base: InMemorySessionStorage<Key, State>) {
    self.base = base
    self.gated = GatedStorage(base)
  }

  /// How many writes each save's second call of `take` returned.
  var secondTakes: [Int] { self.seconds.value }

  func hold() { self.gated.hold() }

  /// Returns once a save is held before taking its batch.
  func waitUntilHeld() async { await self.gated.waitUntilHeld() }

  func release() { self.gated.release() }

  func save(
    owner: String,
    taking take: @Sendable () -> [SessionWrite<Key, State>]
  ) async throws
    -> [SessionSaveResult]
  {
    await self.gated.passGate()
    switch self.mode.value {
    case .failBeforeTaking:
      throw DiskGone()
    case .returnWithoutTaking:
      return []
    case .take:
      let writes = take()
      guard !writes.isEmpty else { return [] }
      let again = take()
      self.seconds.withValue { $0.append(again.count) }
      return try await self.base.save(writes + again, owner: owner)
    }
  }

  func save(_ writes: [SessionWrite<Key, State>], owner: String) async throws -> [SessionSaveResult]
  {
    Issue.record("a registry saves through save(owner:taking:)")
    return try await self.base.save(writes, owner: owner)
  }

}

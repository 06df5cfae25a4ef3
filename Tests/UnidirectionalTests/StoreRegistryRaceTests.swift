import Testing
import Unidirectional

/// Sends racing passivation: every send is applied exactly once, in per-key order, and none goes
/// to a store that is shutting down (its action would be lost with that store's last save).
@Suite(.timeLimit(.minutes(5))) struct StoreRegistryRaceTests {
  static let senders = 8
  static var sendsPerSender: Int { max(200, Int(10_000 * stressScale)) }
  static let keys = 300

  /// Runs the race; returns the violations found (empty when every send was applied once, in
  /// order).
  static func race(seed: UInt64, broken: Bool) async throws -> [String] {
    let storage = InMemorySessionStorage<String, SessionLedger.State>()
    let registry = StoreRegistry(storage: storage, owner: "race") { key in
      SessionLedger.State(key: key)
    } reducer: {
      SessionLedger(clock: ContinuousClock(), gate: Gate())
    }
    if broken { registry.breakActivationForMutationTest() }
    let sends = Self.sendsPerSender
    let errors = LockIsolated<[String]>([])
    try await withThrowingTaskGroup(of: Void.self) { group in
      for sender in 0..<Self.senders {
        group.addTask {
          var random = SplitMix64(state: seed &* 31 &+ UInt64(sender))
          for sequence in 0..<sends {
            let key = "k\(Int.random(in: 0..<Self.keys, using: &random))"
            do {
              try await registry.send(.append(sender * 1_000_000 + sequence), to: key)
              if Int.random(in: 0..<8, using: &random) == 0 {
                let victim = "k\(Int.random(in: 0..<Self.keys, using: &random))"
                try await registry.passivate(victim)
              }
            } catch {
              errors.withValue { $0.append("\(error)") }
            }
          }
        }
      }
      try await group.waitForAll()
    }
    await registry.shutdown(gracePeriod: .seconds(1))
    var violations = errors.value
    var seen = Set<Int>()
    for index in 0..<Self.keys {
      let applied = storage.storedState(for: "k\(index)")?.applied ?? []
      var last = [Int](repeating: -1, count: Self.senders)
      for value in applied {
        if !seen.insert(value).inserted { violations.append("k\(index): \(value) applied twice") }
        let (sender, sequence) = value.quotientAndRemainder(dividingBy: 1_000_000)
        if sequence <= last[sender] {
          violations.append("k\(index): sender \(sender) sent \(sequence) after \(last[sender])")
        }
        last[sender] = sequence
      }
    }
    let missing = Self.senders * sends - seen.count
    if missing > errors.value.count {
      violations.append("\(missing - errors.value.count) acknowledged sends missing")
    }
    return violations
  }

  @Test(arguments: [1, 2, 3, 4, 5] as [UInt64])
  func everySendIsAppliedExactlyOnceInPerKeyOrder(seed: UInt64) async throws {
    let violations = try await Self.race(seed: seed, broken: false)
    #expect(violations.isEmpty, "\(violations.prefix(5))")
  }

  @Test func theRaceCatchesABrokenActivation() async throws {
    let violations = try await Self.race(seed: 1, broken: true)
    #expect(!violations.isEmpty)
  }
}

import CMallocStats
import Testing
import Unidirectional

/// Records, per sender, the sequence numbers reduced: lost, duplicated and out-of-order actions
/// are counted by the reducer itself.
private struct Ledger: Reducer {
  struct State: Sendable {
    var next: [Int]
    var duplicates = 0
    var inversions = 0
    var reduced = 0
    var peakBytes = 0
    var baselineBytes = 0
  }

  enum Action: Sendable {
    case record(sender: Int, sequence: Int)
  }

  func reduce(into state: inout State, action: Action) -> Effect<Action> {
    switch action {
    case .record(let sender, let sequence):
      state.reduced += 1
      let expected = state.next[sender]
      if sequence == expected {
        state.next[sender] += 1
      } else if sequence < expected {
        state.duplicates += 1
      } else {
        state.inversions += 1
        state.next[sender] = sequence + 1
      }
      if state.reduced % 10_000 == 0 {
        state.peakBytes = max(state.peakBytes, Int(cmallocstats_allocated_bytes()))
      }
      return .none
    }
  }
}

private func drive(senders: Int, perSender: Int, seed: UInt64) async -> Ledger.State {
  let store = Store(initialState: Ledger.State(next: Array(repeating: 0, count: senders))) {
    Ledger()
  }
  let priorities: [TaskPriority] = [.high, .medium, .low, .utility, .background, .userInitiated]
  await withTaskGroup(of: Void.self) { group in
    for sender in 0..<senders {
      let priority = priorities[Int((seed &+ UInt64(sender) &* 31) % UInt64(priorities.count))]
      group.addTask(priority: priority) {
        for sequence in 0..<perSender {
          await store.send(.record(sender: sender, sequence: sequence))
        }
      }
    }
  }
  let state = await store.state
  await store.shutdown()
  return state
}

@Suite(.timeLimit(.minutes(2))) struct ReliabilityTests {
  @Test(arguments: [1, 2, 3, 4, 5] as [UInt64])
  func everyActionIsReducedExactlyOnceInPerSenderOrder(seed: UInt64) async {
    let perSender = Int(10_000 * stressScale)
    let state = await drive(senders: 8, perSender: perSender, seed: seed)
    #expect(state.reduced == 8 * perSender)
    #expect(state.duplicates == 0, "seed \(seed)")
    #expect(state.inversions == 0, "seed \(seed)")
    #expect(state.next == Array(repeating: perSender, count: 8), "lost actions, seed \(seed)")
  }

  @Test func aBurstOfAMillionActionsIsReducedExactlyOnceInBoundedMemory() async {
    let before = Int(cmallocstats_allocated_bytes())
    let perSender = Int(125_000 * stressScale)
    let state = await drive(senders: 8, perSender: perSender, seed: 7)
    #expect(state.reduced == 8 * perSender)
    #expect(state.duplicates == 0 && state.inversions == 0)
    let growth = max(0, state.peakBytes - before)
    #expect(
      growth <= 64 * 1_024 * 1_024,
      "burst of 1,000,000 actions: peak heap growth \(growth / 1_024) KiB"
    )
  }
}

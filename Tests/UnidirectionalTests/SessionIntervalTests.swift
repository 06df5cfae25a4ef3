import Testing
import Unidirectional

/// A registry observer that records the intervals it is asked for, in order.
private final class IntervalRecorder: SessionRegistryObserver {
  let events = LockIsolated<[String]>([])
  let measuresIntervals: Bool

  init(measures: Bool) { self.measuresIntervals = measures }

  struct Interval: SessionInterval {
    let name: String
    let events: LockIsolated<[String]>
    func end(error: (any Error)?) {
      self.events.withValue { $0.append("end \(self.name)\(error == nil ? "" : " (failed)")") }
    }
  }

  func sendStarted(key: @autoclosure () -> String) -> (any SessionInterval)? {
    let name = "send \(key())"
    self.events.withValue { $0.append("start \(name)") }
    return Interval(name: name, events: self.events)
  }

  func activationStarted(
    key: @autoclosure () -> String,
    within send: (any SessionInterval)?
  ) -> (any SessionInterval)? {
    let parent = (send as? Interval)?.name ?? "nothing"
    let name = "activate \(key()) within \(parent)"
    self.events.withValue { $0.append("start \(name)") }
    return Interval(name: name, events: self.events)
  }

  func saveStarted(states: Int, sends: Int) -> (any SessionInterval)? {
    let name = "save of \(states) states for \(sends) sends"
    self.events.withValue { $0.append("start \(name)") }
    return Interval(name: name, events: self.events)
  }
}

private struct Tally: Reducer {
  typealias State = Int
  typealias Action = Int
  func reduce(into state: inout Int, action: Int) -> Effect<Int> {
    state += action
    return .none
  }
}

@Suite struct SessionIntervalTests {
  @Test func aSendsActivationAndSaveAreIntervalsNestedAsTheyHappen() async throws {
    let recorder = IntervalRecorder(measures: true)
    let registry = StoreRegistry<String, Tally>(
      storage: InMemorySessionStorage<String, Int>(),
      registryObserver: recorder
    ) { _ in
      0
    } reducer: {
      Tally()
    }
    try await registry.send(1, to: "alice")
    #expect(
      recorder.events.value == [
        "start send alice",
        "start activate alice within send alice",
        "end activate alice within send alice",
        "start save of 1 states for 1 sends",
        "end save of 1 states for 1 sends",
        "end send alice",
      ]
    )
    await registry.shutdown(gracePeriod: .zero)
  }

  @Test func aFailedSendEndsItsIntervalWithTheError() async throws {
    let recorder = IntervalRecorder(measures: true)
    let observed = StoreRegistry<String, Tally>(registryObserver: recorder) { _ in
      0
    } reducer: {
      Tally()
    }
    await observed.shutdown(gracePeriod: .zero)
    await #expect(throws: SessionError.self) { try await observed.send(1, to: "bob") }
    #expect(recorder.events.value == ["start send bob", "end send bob (failed)"])
  }

  @Test func anObserverThatMeasuresNothingIsNeverAskedForASendsInterval() async throws {
    let recorder = IntervalRecorder(measures: false)
    let registry = StoreRegistry<String, Tally>(registryObserver: recorder) { _ in
      0
    } reducer: {
      Tally()
    }
    try await registry.send(1, to: "carol")
    try await registry.send(1, to: "carol")
    #expect(try await registry.send(1, to: "carol", reading: { $0 }) == 3)
    // Activation and saves still ask (they are off the hot path); sends to a live key do not.
    #expect(!recorder.events.value.contains { $0.hasPrefix("start send") })
    await registry.shutdown(gracePeriod: .zero)
  }
}

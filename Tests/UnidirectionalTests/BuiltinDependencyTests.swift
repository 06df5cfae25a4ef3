import Foundation
import Testing
import Unidirectional

/// The dependencies the library ships: live values, test values that report when used, and the
/// helpers tests substitute.
@Suite(.timeLimit(.minutes(1))) struct BuiltinDependencyTests {
  @Test func liveValuesAreRealClocksAndGenerators() {
    let values = DependencyValues()
    #expect(values.continuousClock is ContinuousClock)
    #expect(values.suspendingClock is SuspendingClock)
    #expect(values.uuid() != values.uuid())
    let before = Date()
    let now = values.date()
    #expect(now >= before && now.timeIntervalSince(before) < 60)
    #expect(values.date.now >= before)
  }

  @Test func overridesReplaceEachBuiltin() {
    var values = DependencyValues()
    let instant = Date(timeIntervalSince1970: 1_000)
    let id = UUID(uuidString: "00000000-0000-0000-0000-00000000002A")!
    values.suspendingClock = ImmediateClock()
    values.date = .constant(instant)
    values.uuid = .constant(id)
    #expect(values.suspendingClock is ImmediateClock)
    #expect(values.date() == instant && values.date.now == instant)
    #expect(values.uuid() == id && values.uuid() == id)
    values.uuid = .incrementing
    #expect(values.uuid().uuidString == "00000000-0000-0000-0000-000000000000")
    #expect(values.uuid().uuidString == "00000000-0000-0000-0000-000000000001")
  }

  @Test func testValuesReportWhenUsed() async {
    var values = DependencyValues()
    values.context = .test
    let (_, issues) = await collectingIssues {
      _ = values.uuid()
      _ = values.date()
      let clock = values.suspendingClock
      try? await clock.sleep(for: .seconds(1))
      try? await values.continuousClock.sleep(for: .seconds(1))
    }
    let messages = issues.map(\.message)
    #expect(messages.contains { $0.hasPrefix("An unimplemented dependency was used: '\\.uuid'.") })
    #expect(messages.contains { $0.hasPrefix("An unimplemented dependency was used: '\\.date'.") })
    #expect(messages.contains { $0.contains("suspendingClock") })
    #expect(messages.contains { $0.contains("continuousClock") })
  }
}

/// What observers get by default, and how their values print (for logs).
@Suite(.timeLimit(.minutes(1))) struct StoreObserverDefaultsTests {
  /// Implements nothing: every event goes to the protocol's do-nothing defaults.
  private struct Silent: StoreObserver {
    typealias State = Int
    typealias Action = Int
  }

  /// Records descriptions of what it sees.
  private struct Describing: StoreObserver {
    typealias State = Int
    typealias Action = Int
    let log: LockIsolated<[String]>
    func actionReduced(_ action: Int, origin: ActionOrigin) {
      self.log.withValue { $0.append("\(action) from \(origin)") }
    }
    func effectEnded(_ effect: EffectReference, outcome: EffectOutcome) {
      self.log.withValue { $0.append("\(effect.description.prefix(7)) \(outcome)") }
    }
  }

  private struct Failure: Error, CustomStringConvertible {
    var description: String { "boom" }
  }

  private static var feature: Reduce<Int, Int> {
    Reduce { state, action in
      state += action
      switch action {
      case 1: return .send(10)
      case 2: return .run { send in await send(20) }
      case 3:
        return .run { _ in
          throw Failure()
        } catch: { _, _ in
        }
      default: return .none
      }
    }
  }

  @Test func anObserverThatImplementsNothingChangesNothing() async {
    let store = Store(initialState: 0, observer: Silent()) { Self.feature }
    await store.send(1)
    await store.send(2).finish()
    #expect(await store.state == 33)
    await store.shutdown()
  }

  @Test func originsAndOutcomesDescribeThemselves() async {
    let log = LockIsolated<[String]>([])
    let store = Store(initialState: 0, observer: Describing(log: log)) { Self.feature }
    await store.send(1)
    await store.send(2).finish()
    await store.send(3).finish()
    let reduced = log.value.filter { $0.contains(" from ") }
    #expect(reduced.count == 5)
    #expect(
      reduced.filter { !$0.contains("effect#") } == [
        "1 from send", "10 from immediate", "2 from send", "3 from send",
      ]
    )
    #expect(reduced.contains { $0.hasPrefix("20 from effect#") })
    #expect(log.value.contains("effect# finished"))
    #expect(log.value.contains("effect# failed: boom"))
    #expect(EffectOutcome.cancelled.description == "cancelled")
    #expect(ActionOrigin.send.description == "send")
    await store.shutdown()
  }
}

/// Transforming and combining effects: every shape maps, and helpers build the shapes they name.
@Suite(.timeLimit(.minutes(1))) struct EffectCompositionTests {
  enum Child: Sendable, Equatable { case tick(Int) }
  enum Parent: Sendable, Equatable { case child(Child), done }

  @Test func mappingKeepsEveryShapeAndOrder() async {
    let child = Effect<Child>.concatenate(
      .send(.tick(1)),
      .merge(.run { send in await send(.tick(2)) }),
      .run { send in await send(.tick(3)) }.queued(id: "q"),
      Effect<Child>.send(.tick(4)).throttle(
        id: "t",
        for: .seconds(1),
        clock: ImmediateClock(),
        latest: false
      )
    )
    var received: [Parent] = []
    for await action in child.map(Parent.child) { received.append(action) }
    #expect(received == [.child(.tick(1)), .child(.tick(2)), .child(.tick(3)), .child(.tick(4))])
  }

  @Test func concatenatingWithAndFireAndForgetRunInOrder() async {
    let ran = LockIsolated<[String]>([])
    let effect = Effect<Parent>.fireAndForget { ran.withValue { $0.append("fire") } }
      .concatenate(with: .send(.done))
      .merge(with: .none)
    var received: [Parent] = []
    for await action in effect { received.append(action) }
    #expect(ran.value == ["fire"])
    #expect(received == [.done])
  }

  @Test func mergingFlattensNestedMergesAndDropsNone() async {
    let effect = Effect<Parent>.merge(
      .none,
      .merge(.send(.done), .merge(.none, .send(.done))),
      .send(.child(.tick(0)))
    )
    var received: [Parent] = []
    for await action in effect { received.append(action) }
    #expect(received.count == 3)
    #expect(received.filter { $0 == .done }.count == 2)
  }
}

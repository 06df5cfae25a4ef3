import Testing
import UnidirectionalTesting

@testable import Unidirectional

/// Timers under their own identifiers, armed, cancelled and fired one after another: the record of
/// a timer that ended is kept for the store's next timer, and reused only when nothing else holds
/// it.
private struct Timers: Reducer {
  struct State: Equatable, Sendable {
    var fired: [Int] = []
  }

  enum Action: Equatable, Sendable {
    case arm(Int)
    /// `arm`, with an effect the reducer keeps (as a `static let` effect would be): its payload
    /// is held, so a store copies it into a record of its own.
    case armKept(Int)
    case cancel(Int)
    case fired(Int)
  }

  let clock: TestClock
  /// The effects of `armKept`, by identifier.
  var kept = LockIsolated<[Int: Effect<Action>]>([:])
  /// The identity of the last timer payload `arm` returned (not the payload: holding it here
  /// would keep the store from taking it).
  var lastPayload = LockIsolated<ObjectIdentifier?>(nil)

  func reduce(into state: inout State, action: Action) -> Effect<Action> {
    switch action {
    case .arm(let id):
      let effect = Effect<Action>.send(.fired(id), after: .seconds(1), clock: self.clock)
        .cancellable(id: id)
      if case .timer(let payload, _, _) = effect.operation {
        self.lastPayload.setValue(ObjectIdentifier(payload))
      }
      return effect
    case .armKept(let id):
      return self.kept.withValue { kept in
        if let effect = kept[id] { return effect }
        let effect = Effect<Action>.send(.fired(id), after: .seconds(1), clock: self.clock)
          .cancellable(id: id)
        kept[id] = effect
        return effect
      }
    case .cancel(let id):
      return .cancel(id: id)
    case .fired(let id):
      state.fired.append(id)
      return .none
    }
  }
}

@Suite(.timeLimit(.minutes(1))) struct TimerRecordReuseTests {
  /// The identity of the record armed under `id`.
  ///
  /// NB: not the record itself: a reference held here would keep it from being reused. A kept
  /// record is not freed, so an equal identity is the same record, not a new one at its address.
  private func record(
    _ id: Int,
    in store: Store<Timers.State, Timers.Action>
  ) -> ObjectIdentifier? {
    store.core.supervisor?.units(under: CancelKey(id, scope: nil)).first.map(ObjectIdentifier.init)
  }

  @Test func aTimersPayloadThatNothingElseHoldsBecomesItsRecord() async throws {
    let clock = TestClock()
    let timers = Timers(clock: clock)
    let store = Store(initialState: Timers.State()) { timers }
    await store.send(.arm(1))
    let payload = try #require(timers.lastPayload.value)
    #expect(self.record(1, in: store) == payload)
    // A second timer due at the same instant, taken the same way, fires after it.
    await store.send(.arm(2))
    #expect(self.record(2, in: store) == timers.lastPayload.value)
    await clock.advance(by: .seconds(1))
    #expect(await store.state.fired == [1, 2])
    #expect(store.liveEffectCount == 0)
    await store.shutdown()
  }

  @Test func aPayloadSomethingElseHoldsIsCopiedSoEachStoreArmsItsOwnRecord() async throws {
    let clock = TestClock()
    let timers = Timers(clock: clock)
    let first = Store(initialState: Timers.State()) { timers }
    let second = Store(initialState: Timers.State()) { timers }
    // One effect value, kept by the reducer, armed by two stores: each copies it.
    await first.send(.armKept(1))
    await second.send(.armKept(1))
    let firstRecord = try #require(self.record(1, in: first))
    let secondRecord = try #require(self.record(1, in: second))
    #expect(firstRecord != secondRecord)
    // Cancelled in one store, the timer still fires in the other; re-armed, it fires again.
    await first.send(.cancel(1))
    await clock.advance(by: .seconds(1))
    #expect(await first.state.fired == [])
    #expect(await second.state.fired == [1])
    await first.send(.armKept(1))
    await second.send(.armKept(1))
    await clock.advance(by: .seconds(1))
    #expect(await first.state.fired == [1])
    #expect(await second.state.fired == [1, 1])
    await first.shutdown()
    await second.shutdown()
  }

  @Test func aRecordAStoreTaskStillHoldsIsNotReusedForTheNextTimer() async throws {
    let clock = TestClock()
    let store = Store(initialState: Timers.State()) { Timers(clock: clock) }
    // The timer is its send's first unit, so that send's task stands for it.
    let first = await store.send(.armKept(1))
    let record = try #require(self.record(1, in: store))
    await store.send(.cancel(1))
    #expect(first.isFinished)
    let second = await store.send(.armKept(2))
    #expect(self.record(2, in: store) != record)
    // Cancelling the first task again reaches nothing of the second timer's.
    first.cancel()
    await clock.advance(by: .seconds(1))
    await second.finish()
    #expect(await store.state.fired == [2])
    await store.shutdown()
  }
}

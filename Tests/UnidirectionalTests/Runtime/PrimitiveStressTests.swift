import Testing

@testable import Unidirectional

/// The audited primitives under load: their safety contracts hold when threads race.
@Suite(.timeLimit(.minutes(2))) struct PrimitiveStressTests {
  /// `LockedBox`: increments from many tasks at once are never lost.
  @Test func aLockedBoxLosesNoUpdate() async {
    let box = LockedBox(0)
    let tasks = 8
    let increments = Int(20_000 * stressScale)
    await withTaskGroup(of: Void.self) { group in
      for _ in 0..<tasks {
        group.addTask {
          for _ in 0..<increments { box.withLock { $0 += 1 } }
        }
      }
    }
    #expect(box.withLock { $0 } == tasks * increments)
  }

  /// `Immutable`: a key path and an `AnyHashable` identity, shared by many tasks at once, read,
  /// hash, compare and describe the same in each (ThreadSanitizer sees any write).
  @Test func anImmutableValueReadsTheSameFromEveryTask() async {
    struct Row: Hashable {
      var name: String
      var count: Int
    }
    let path = Immutable(\Row.count)
    let identity = Immutable(AnyHashable(Row(name: "a", count: 1)))
    let anyPath = Immutable<AnyKeyPath>(\Row.count)
    let rounds = Int(2_000 * stressScale)
    let agreeing = await withTaskGroup(of: Int.self) { group in
      for task in 0..<8 {
        group.addTask {
          var agreeing = 0
          for index in 0..<rounds {
            var row = Row(name: "\(task)", count: index)
            row[keyPath: path.value] += 1
            let same =
              row.count == index + 1
              && identity == Immutable(AnyHashable(Row(name: "a", count: 1)))
              && identity.hashValue == AnyHashable(Row(name: "a", count: 1)).hashValue
              && anyPath == Immutable<AnyKeyPath>(\Row.count)
              && anyPath != Immutable<AnyKeyPath>(\Row.name)
              && identity.description == #"Row(name: "a", count: 1)"#
            if same { agreeing += 1 }
          }
          return agreeing
        }
      }
      return await group.reduce(0, +)
    }
    #expect(agreeing == 8 * rounds)
  }

  /// `TaskSlot`: cancellers race effects that are returning.
  ///
  /// A canceller that read a task's handle keeps that task alive until it has cancelled it; the
  /// effect waits, then finishes. Under ThreadSanitizer and AddressSanitizer a broken pin shows as
  /// a use after free.
  @Test func cancellersRacingEffectsThatEndNeverTouchAnEndedTask() async {
    enum Action: Sendable {
      case start(Int)
      case cancel(Int)
    }
    let store = Store(initialState: 0) {
      Reduce<Int, Action> { state, action in
        switch action {
        case .start(let id):
          return .run { _ in
            var spin = 0
            for index in 0..<(id * 37 % 200) { spin &+= index }
            _ = spin
          }
          .cancellable(id: id % 8)
        case .cancel(let id):
          state += 1
          return .cancel(id: id % 8)
        }
      }
    }
    let rounds = Int(4_000 * stressScale)
    let tasks = await withTaskGroup(of: [StoreTask].self) { group in
      group.addTask {
        var tasks: [StoreTask] = []
        for index in 0..<rounds { tasks.append(await store.send(.start(index))) }
        return tasks
      }
      group.addTask {
        for index in 0..<rounds { await store.send(.cancel(index)) }
        return []
      }
      return await group.reduce(into: []) { $0 += $1 }
    }
    for task in tasks { await task.finish() }
    #expect(store.liveEffectCount == 0)
    #expect(store.registeredIdentifierCount == 0)
    #expect(await store.state == rounds)
  }

  /// The same race for `.run`s with no identifier, which their tasks start without the lock
  /// (`RunUnit`): each send's `StoreTask.cancel()` races its effect's start and its end.
  @Test func cancellersRacingListedEffectsThatStartAndEndNeverTouchAnEndedTask() async {
    let store = Store(initialState: 0) {
      Reduce<Int, Int> { state, id in
        state += 1
        return .run { _ in
          var spin = 0
          for index in 0..<(id * 37 % 200) { spin &+= index }
          _ = spin
        }
      }
    }
    let rounds = Int(4_000 * stressScale)
    let (sent, continuation) = AsyncStream<StoreTask>.makeStream()
    let tasks = await withTaskGroup(of: [StoreTask].self) { group in
      group.addTask {
        for index in 0..<rounds { continuation.yield(await store.send(index)) }
        continuation.finish()
        return []
      }
      group.addTask {
        var tasks: [StoreTask] = []
        for await task in sent {
          task.cancel()
          tasks.append(task)
        }
        return tasks
      }
      return await group.reduce(into: []) { $0 += $1 }
    }
    #expect(tasks.count == rounds)
    for task in tasks { await task.finish() }
    #expect(store.liveEffectCount == 0)
    #expect(await store.state == rounds)
  }
}

import Foundation
import Testing

@testable import Unidirectional

/// Scoped stores of scoped stores, and the store surface reached through a scoped store.
@Suite(.timeLimit(.minutes(1))) struct ScopedStoreSurfaceTests {
  struct Inner: Equatable, Sendable { var count = 0 }
  struct Middle: Equatable, Sendable { var inner = Inner() }
  struct Outer: Equatable, Sendable { var middle = Middle() }
  enum InnerAction: Sendable { case increment, work }
  enum MiddleAction: Sendable { case inner(InnerAction) }
  enum OuterAction: Sendable { case middle(MiddleAction) }

  static var feature: Reduce<Outer, OuterAction> {
    Reduce { state, action in
      switch action {
      case .middle(.inner(.increment)):
        state.middle.inner.count += 1
        return .none
      case .middle(.inner(.work)):
        return .run { _ in await untilCancelled() }
      }
    }
  }

  @Test func aScopeOfAScopeSendsThroughBothEmbeddings() async {
    let store = Store(initialState: Outer()) { Self.feature }
    let middle = store.scope(state: \.middle, action: OuterAction.middle)
    let inner = middle.scope(state: \.inner, action: MiddleAction.inner)
    await inner.send(.increment)
    #expect(await inner.state.count == 1)
    #expect(await store.state.middle.inner.count == 1)
    let deeper = inner.scope(state: \.count, action: { (action: InnerAction) in action })
    await deeper.send(.increment)
    #expect(await deeper.state == 2)
    await store.shutdown()
  }

  @Test func aScopedStoreShutsItsRootDownAndThenRejectsQuietly() async {
    let store = Store(initialState: Outer()) { Self.feature }
    let inner = store.scope(state: \.middle, action: OuterAction.middle)
      .scope(state: \.inner, action: MiddleAction.inner)
    await inner.send(.work)
    #expect(store.liveEffectCount == 1)
    await inner.shutdown(gracePeriod: .zero, clock: ImmediateClock())
    #expect(await inner.isShutDown)
    #expect(await store.isShutDown)
    #expect(store.liveEffectCount == 0)
    #expect(await inner.trySend(.increment) == nil)
    let other = Store(initialState: Outer()) { Self.feature }
    let otherInner = other.scope(state: \.middle, action: OuterAction.middle)
    await otherInner.shutdown()
    #expect(await other.isShutDown)
  }

  @Test func statesOfAPartAreMapped() async {
    let store = Store(initialState: Outer()) { Self.feature }
    var counts = store.states.map(\.middle.inner.count).makeAsyncIterator()
    #expect(await counts.next() == 0)
    await store.send(.middle(.inner(.increment)))
    #expect(await counts.next() == 1)
    await store.shutdown()
    #expect(await counts.next() == nil)
  }
}

/// Small public helpers and descriptions.
@Suite(.timeLimit(.minutes(1))) struct HelperSurfaceTests {
  @Test func withTaskCancellationOutsideAnEffectJustRuns() async throws {
    let value = try await withTaskCancellation(id: "outside") { 42 }
    #expect(value == 42)
  }

  @Test func lockIsolatedAndTheSynchronousIssueReporterScope() {
    let box = LockIsolated(1)
    let doubled = box.withValue { value -> Int in
      value *= 2
      return value
    }
    #expect(doubled == 2 && box.value == 2)
    let issues = LockIsolated<[String]>([])
    withIssueReporter(IssueReporter { issue in issues.withValue { $0.append(issue.message) } }) {
      reportIssue("captured")
    }
    #expect(issues.value == ["captured"])
  }

  @Test func clocksReportTheirResolutionAndDurations() {
    let immediate = ImmediateClock()
    let start = immediate.now
    #expect(immediate.minimumResolution == .zero)
    #expect(start.duration(to: start.advanced(by: .seconds(3))) == .seconds(3))
    #expect(TestClock().minimumResolution == .zero)
    #expect(UnimplementedClock().minimumResolution == .zero)
  }

  @Test func cancellationIdentifiersDescribeTheirValue() {
    #expect(CancelKey("search", scope: nil).description == "search")
    #expect(CancelKey(7, scope: nil).description == "7")
  }

  @Test func aReducerThatImplementsReduceHasNoBody() async {
    await #expect(processExitsWith: .failure) {
      struct Plain: Reducer {
        func reduce(into state: inout Int, action: Int) -> Effect<Int> { .none }
      }
      _ = Plain().body
    }
  }

  @Test func reduceWrapsAnotherReducer() {
    struct Adder: Reducer {
      func reduce(into state: inout Int, action: Int) -> Effect<Int> {
        state += action
        return .none
      }
    }
    var state = 1
    _ = Reduce(Adder()).reduce(into: &state, action: 2)
    #expect(state == 3)
  }
}

/// What `_printChanges` prints when nothing changed, and how dumps print the remaining shapes.
@Suite(.timeLimit(.minutes(1))) struct DumpShapeTests {
  final class Node {
    var next: Node?
  }

  struct Labelled: CustomStringConvertible {
    var description: String { "custom" }
  }

  @Test func anActionThatChangesNothingSaysSo() async {
    let (entries, continuation) = AsyncStream<String>.makeStream()
    let store = Store(initialState: 0) {
      Reduce<Int, Int> { _, _ in .none }.debug { entry in continuation.yield(entry) }
    }
    await store.send(5)
    var iterator = entries.makeAsyncIterator()
    #expect(await iterator.next() == "received action:\n  5\n  (No state changes)")
    await store.shutdown()
  }

  @Test func dumpsOptionalsCharactersTuplesCyclesAndCustomDescriptions() {
    let node = Node()
    node.next = node
    struct Holder { var count: Int? = 3 }
    let three: Int? = 3
    #expect(customDump(three as Any) == "3")
    #expect(customDump(Holder()).contains("count: 3"))
    #expect(customDump(Character("x")) == "\"x\"")
    #expect(customDump((1, name: "a")).contains("name: \"a\""))
    #expect(customDump(node).contains("(↩︎)"))
    node.next = nil  // break the cycle: it would leak (LeakSanitizer in CI)
    #expect(customDump(Labelled()) == "custom")
  }

  @Test func veryLargeDiffsFallBackToReplacingEveryLine() {
    let old = (0..<2_100).map { "line \($0)" }.joined(separator: "\n")
    let new = (0..<2_100).map { "line \($0 + 1)" }.joined(separator: "\n")
    let diff = diffDumps(old, new) ?? ""
    #expect(diff.split(separator: "\n").filter { $0.hasPrefix("-") }.count == 2_100)
  }
}

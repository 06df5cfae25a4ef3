import Testing
import Unidirectional

/// An `Effect` iterated outside any store: its own cancellation scope and task.
@Suite(.timeLimit(.minutes(2))) struct EffectSequenceTests {
  private static func collect(_ effect: Effect<Int>) async -> [Int] {
    var actions: [Int] = []
    for await action in effect { actions.append(action) }
    return actions
  }

  @Test func synchronousActionsComeFirstInOrderThenAsynchronousOnes() async {
    let effect = Effect<Int>.merge(
      .send(1),
      .run { send in await send(3) },
      .send(2)
    )
    #expect(await Self.collect(effect) == [1, 2, 3])
  }

  @Test func aConcatenationRunsItsPartsInOrder() async {
    let effect = Effect<Int>.concatenate(
      .run { send in await send(1) },
      .run { send in
        await send(2)
        await send(3)
      },
      .send(4)
    )
    #expect(await Self.collect(effect) == [1, 2, 3, 4])
  }

  @Test func cancellationInsideTheEffectIsHonoured() async {
    enum ID { case work }
    let effect = Effect<Int>.merge(
      .send(1).cancellable(id: ID.work),
      .run { send in await send(2) }.cancellable(id: ID.work),
      .cancel(id: ID.work),
      .send(3)
    )
    #expect(await Self.collect(effect) == [3])
  }

  @Test func droppingTheIteratorCancelsTheWork() async {
    let (ended, endedContinuation) = AsyncStream.makeStream(of: Bool.self)
    let (never, _) = AsyncStream.makeStream(of: Int.self)
    let effect = Effect<Int>.run { send in
      await send(1)
      for await _ in never {}  // parks until its task is cancelled
      endedContinuation.yield(Task.isCancelled)
    }
    do {
      var iterator = effect.makeAsyncIterator()
      #expect(await iterator.next() == 1)
    }  // the iterator is dropped here
    var endings = ended.makeAsyncIterator()
    #expect(await endings.next() == true)
  }

  @Test func anEffectFromASequenceSendsEachElement() async {
    let (stream, continuation) = AsyncStream.makeStream(of: Int.self)
    for value in 1...3 { continuation.yield(value) }
    continuation.finish()
    #expect(await Self.collect(Effect(stream)) == [1, 2, 3])

    let (again, more) = AsyncStream.makeStream(of: Int.self)
    more.yield(4)
    more.finish()
    #expect(await Self.collect(.run(again)) == [4])
  }

  @Test func aSequenceThatThrowsIsReported() async {
    struct Failure: Error {}
    let stream = AsyncThrowingStream<Int, any Error> { continuation in
      continuation.yield(1)
      continuation.finish(throwing: Failure())
    }
    let (actions, issues) = await collectingIssues {
      await Self.collect(.run(stream))
    }
    #expect(actions == [1])
    #expect(
      issues.map(\.message.firstLine) == [
        "An 'Effect.run' threw an error and has no 'catch' handler."
      ]
    )
  }

  @Test func iteratingNoneOrOnlySendsNeedsNoTask() async {
    #expect(await Self.collect(.none).isEmpty)
    #expect(await Self.collect(.concatenate(.send(1), .send(2))) == [1, 2])
  }
}

extension String {
  fileprivate var firstLine: Substring {
    self.split(separator: "\n", maxSplits: 1).first ?? ""
  }
}

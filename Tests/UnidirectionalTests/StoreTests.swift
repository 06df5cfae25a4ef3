import Testing
import Unidirectional
import UnidirectionalTesting

/// A feature exercising each kind of effect.
private struct Feature: Reducer {
  struct State: Equatable, Sendable {
    var count = 0
    var log: [String] = []
  }

  enum Action: Equatable, Sendable {
    case increment
    case chain(remaining: Int)
    case startEcho(Int)
    case echoed(Int)
    case startForever
    case foreverStarted
    case failWithoutCatch
    case failWithCatch
    case failed(String)
    case cancelQuietly
  }

  /// Opened by `.startForever`'s effect once `.foreverStarted` has been reduced.
  let started: Latch?

  init(started: Latch? = nil) {
    self.started = started
  }

  func reduce(into state: inout State, action: Action) -> Effect<Action> {
    switch action {
    case .increment:
      state.count += 1
      return .none
    case .chain(let remaining):
      state.count += 1
      return remaining == 0 ? .none : .send(.chain(remaining: remaining - 1))
    case .startEcho(let value):
      state.log.append("start \(value)")
      return .run { send in await send(.echoed(value)) }
    case .echoed(let value):
      state.log.append("echo \(value)")
      return .none
    case .startForever:
      return .run { [started] send in
        await send(.foreverStarted)
        started?.open()
        try await suspendUntilCancelled()
      }
    case .foreverStarted:
      state.log.append("forever started")
      return .none
    case .failWithoutCatch:
      return .run { _ in throw Failure(message: "boom") }
    case .failWithCatch:
      return .run { _ in
        throw Failure(message: "boom")
      } catch: { error, send in
        await send(.failed("\(error)"))
      }
    case .failed(let message):
      state.log.append("failed: \(message)")
      return .none
    case .cancelQuietly:
      return .run { _ in throw CancellationError() }
    }
  }
}

private struct Failure: Error, CustomStringConvertible {
  let message: String
  var description: String { self.message }
}

/// Suspends until the task is cancelled, then throws `CancellationError`.
func suspendUntilCancelled() async throws {
  let latch = Latch()
  await withTaskCancellationHandler {
    await latch.wait()
  } onCancel: {
    latch.open()
  }
  throw CancellationError()
}

@Suite(.timeLimit(.minutes(1)))
struct StoreTests {
  @Test func sendReducesTheActionBeforeReturning() async {
    let store = Store(initialState: Feature.State()) { Feature() }
    await store.send(.increment)
    await store.send(.increment)
    #expect(await store.state.count == 2)
  }

  @Test func synchronousSendEffectsAreReducedBeforeSendReturns() async {
    let store = Store(initialState: Feature.State()) { Feature() }
    let task = await store.send(.chain(remaining: 3))
    #expect(await store.state.count == 4)
    #expect(task.isFinished)
    #expect(store.liveEffectCount == 0)
  }

  @Test func hundredThousandChainedSendsDoNotOverflowTheStack() async {
    let store = Store(initialState: Feature.State()) { Feature() }
    await store.send(.chain(remaining: 100_000))
    #expect(await store.state.count == 100_001)
  }

  @Test func runEffectFeedsItsActionBackAndFinishes() async {
    let store = Store(initialState: Feature.State()) { Feature() }
    let task = await store.send(.startEcho(7))
    await task.finish()
    #expect(await store.state.log == ["start 7", "echo 7"])
    #expect(task.isFinished)
    #expect(!task.isCancelled)
    #expect(store.liveEffectCount == 0)
  }

  @Test func cancellingTheStoreTaskCancelsItsEffects() async {
    let store = Store(initialState: Feature.State()) { Feature() }
    let task = await store.send(.startForever)
    task.cancel()
    await task.finish()
    #expect(task.isCancelled)
    #expect(store.liveEffectCount == 0)
  }

  @Test func cancellingTheTaskAwaitingFinishCancelsTheEffects() async {
    let store = Store(initialState: Feature.State()) { Feature() }
    let storeTask = await store.send(.startForever)
    let waiter = Task { await storeTask.finish() }
    waiter.cancel()
    await waiter.value
    #expect(storeTask.isCancelled)
    #expect(storeTask.isFinished)
  }

  @Test func taskOfAnActionWithoutEffectsIsFinished() async {
    let store = Store(initialState: Feature.State()) { Feature() }
    let task = await store.send(.increment)
    await task.finish()
    #expect(task.isFinished)
    #expect(task.isCancelled)  // nothing to run: as in the Composable Architecture
    #expect(task == (await store.send(.increment)))
  }

  @Test func actionsFromOneSenderAreReducedInOrderExactlyOnce() async {
    let store = Store(initialState: Feature.State()) { Feature() }
    for value in 0..<200 {
      await store.send(.startEcho(value)).finish()
    }
    let log = await store.state.log
    #expect(log.count == 400)
    #expect(log == (0..<200).flatMap { ["start \($0)", "echo \($0)"] })
  }

  @Test func sendAfterShutdownIsReportedAndChangesNothing() async {
    let (result, issues) = await collectingIssues {
      let store = Store(initialState: Feature.State()) { Feature() }
      await store.send(.increment)
      await store.shutdown()
      let task = await store.send(.increment)
      return (await store.state.count, task.isFinished, await store.isShutDown)
    }
    #expect(result.0 == 1)
    #expect(result.1)
    #expect(result.2)
    #expect(issues.count == 1)
    let message = issues.first?.message ?? ""
    #expect(message.contains("An action was sent to a store that has been shut down."))
    #expect(message.contains(".increment"))
    #expect(issues.first?.fileID == "UnidirectionalTests/StoreTests.swift")
  }

  @Test func effectThrowingWithoutCatchIsReported() async {
    let (_, issues) = await collectingIssues {
      let store = Store(initialState: Feature.State()) { Feature() }
      await store.send(.failWithoutCatch).finish()
    }
    #expect(issues.count == 1)
    let message = issues.first?.message ?? ""
    #expect(message.contains("An 'Effect.run' threw an error and has no 'catch' handler."))
    #expect(message.contains("boom"))
    #expect(issues.first?.fileID == "UnidirectionalTests/StoreTests.swift")
  }

  @Test func catchHandlerTurnsTheErrorIntoAnAction() async {
    let (log, issues) = await collectingIssues {
      let store = Store(initialState: Feature.State()) { Feature() }
      await store.send(.failWithCatch).finish()
      return await store.state.log
    }
    #expect(issues.isEmpty)
    #expect(log == ["failed: boom"])
  }

  @Test func cancellationErrorEndsAnEffectQuietly() async {
    let (_, issues) = await collectingIssues {
      let store = Store(initialState: Feature.State()) { Feature() }
      await store.send(.cancelQuietly).finish()
    }
    #expect(issues.isEmpty)
  }

  @Test func shutdownCancelsEveryEffectAndWaitsForIt() async {
    let store = Store(initialState: Feature.State()) { Feature() }
    let first = await store.send(.startForever)
    let second = await store.send(.startForever)
    #expect(store.liveEffectCount == 2)
    await store.shutdown()
    #expect(store.liveEffectCount == 0)
    #expect(first.isFinished)
    #expect(second.isFinished)
  }

  @Test func releasingTheLastReferenceCancelsEffectsAndFreesTheStore() async {
    let started = Latch()
    var store: Store<Feature.State, Feature.Action>? =
      Store(initialState: Feature.State()) { Feature(started: started) }
    weak let weakStore = store
    let task = await store?.send(.startForever)
    await started.wait()
    #expect(await store?.state.log == ["forever started"])
    store = nil
    #expect(weakStore == nil)
    await task?.finish()
    #expect(task?.isFinished == true)
  }

  /// `@main` programs and `@MainActor` tests create stores on the main actor: the closures the
  /// initializer takes are formed there and must not need sending into the store.
  @MainActor
  @Test func aStoreIsCreatedFromTheMainActor() async {
    let label = NonSendableLabel(text: "main")
    let store = Store(initialState: Feature.State()) {
      Reduce<Feature.State, Feature.Action> { state, action in
        state.log.append(label.text)
        return .none
      }
    } withDependencies: { _ in
      _ = label.text
    }
    await store.send(.increment)
    #expect(await store.state.log == ["main"])
    let observed = Store(initialState: 0, observer: SilentObserver()) {
      Reduce<Int, Int> { state, action in
        state += action
        return .none
      }
    }
    await observed.send(2)
    #expect(await observed.state == 2)
  }

  @Test func effectBodiesDoNotRunOnTheStore() async {
    // Statically: the body is `@concurrent`, so it runs on no actor.
    let isolation = LockIsolated<String?>("unset")
    let effect = Effect<Int>.run { _ in
      isolation.setValue(#isolation.map { "\($0)" })
    }
    for await _ in effect {}
    #expect(isolation.value == nil)

    // Dynamically: a body that spins until the store reduces another action would spin forever
    // if it ran on the store.
    let reduced = LockIsolated(false)
    let spinning = Latch()
    let store = Store(initialState: 0) {
      Reduce<Int, Bool> { state, isSpin in
        if isSpin {
          return .run { _ in
            spinning.open()
            while !reduced.value {}
          }
        }
        state += 1
        reduced.setValue(true)
        return .none
      }
    }
    let spin = await store.send(true)
    await spinning.wait()
    await store.send(false)
    await spin.finish()
    #expect(await store.state == 1)
  }
}

/// A value the closures above capture that is not `Sendable`.
private final class NonSendableLabel {
  let text: String
  init(text: String) { self.text = text }
}

private struct SilentObserver: StoreObserver {
  typealias State = Int
  typealias Action = Int
}

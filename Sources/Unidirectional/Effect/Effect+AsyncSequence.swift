// MARK: - Iterating an effect

extension Effect: AsyncSequence {
  /// An effect's elements are the actions it sends.
  public typealias Element = Action
  /// Iterating an effect never throws.
  public typealias Failure = Never

  /// Creates an iterator; the effect starts running with the first `next()`.
  ///
  /// Iterating runs the effect outside any store, with its own cancellation scope: `.send`
  /// actions come first, in order, then the actions of the asynchronous work as it sends them.
  /// The iteration ends when all the work has finished. Cancelling the iterating task, or
  /// dropping the iterator, cancels the work.
  public func makeAsyncIterator() -> Iterator {
    Iterator(effect: self)
  }

  /// Iterates the actions of an effect.
  public struct Iterator: AsyncIteratorProtocol {
    private let effect: Effect
    private var run: StandaloneEffectRun<Action>?
    private var iterator: AsyncStream<Action>.Iterator?

    init(effect: Effect) {
      self.effect = effect
    }

    /// The next action, or `nil` once the effect has finished.
    public mutating func next() async -> Action? {
      await self.next(isolation: #isolation)
    }

    /// The next action, or `nil` once the effect has finished.
    public mutating func next(isolation actor: isolated (any Actor)?) async -> Action? {
      if self.run == nil {
        let run = StandaloneEffectRun(effect: self.effect)
        self.run = run
        self.iterator = run.actions.makeAsyncIterator()
      }
      return await self.iterator?.next(isolation: actor)
    }
  }
}

@available(*, unavailable)
extension Effect.Iterator: Sendable {}

/// Where the effects of a standalone run send: the iterator's stream.
private actor StreamReceiver<Action: Sendable>: EffectReceiver {
  let continuation: AsyncStream<Action>.Continuation

  init(_ continuation: AsyncStream<Action>.Continuation) {
    self.continuation = continuation
  }

  func receive(_ action: Action, from unit: any EffectUnit) {
    guard !unit.isCancelled else { return }
    self.continuation.yield(action)
  }
}

/// One run of an effect outside a store: its own supervisor, and one task owning the work.
final class StandaloneEffectRun<Action: Sendable>: Sendable {
  let actions: AsyncStream<Action>
  private let supervisor: EffectSupervisor
  private let task: Task<Void, Never>?

  init(effect: Effect<Action>) {
    let (actions, continuation) = AsyncStream.makeStream(of: Action.self)
    let supervisor = EffectSupervisor(executorPreference: nil, reporter: IssueReporter.current)
    let delivery = EffectDelivery(receiver: StreamReceiver(continuation))
    var planner = EffectPlanner<Action>()
    planner.lowersTimers = true
    var sends: [(Action, EffectToken?)] = []
    planner.plan(effect, delivery: delivery, supervisor: supervisor) { action, token in
      sends.append((action, token))
    }
    let jobs = planner.jobs
    planner.jobs = []
    var noJobs: [any EffectJob] = []
    supervisor.apply(&planner.steps, jobs: &noJobs)
    for (action, token) in sends {
      if let token {
        if !token.isCancelled { continuation.yield(action) }
        supervisor.complete(token)
      } else {
        continuation.yield(action)
      }
    }
    self.actions = actions
    self.supervisor = supervisor
    if jobs.isEmpty {
      self.task = nil
      continuation.finish()
      return
    }
    // NB: an iterator has no enclosing scope to run the work in; it owns this task and cancels
    // it when iteration ends or is dropped. The jobs run as children of its group.
    let task = Task {
      await EffectSupervisor.$current.withValue(supervisor) {
        await withDiscardingTaskGroup { group in
          for job in jobs {
            group.addTask(priority: job.priority) { await job.run(on: supervisor) }
          }
        }
      }
      continuation.finish()
    }
    self.task = task
    continuation.onTermination = { _ in
      supervisor.shutDown()
      task.cancel()
    }
  }

  deinit {
    self.supervisor.shutDown()
    self.task?.cancel()
  }
}

import CUnidirectional

/// Effect tasks an action asked for, held back until the sender has left the store's executor,
/// to start on the sender's thread (``Store/trySendStartingEffectsHere(_:reading:)``).
///
/// A task started on the thread that sends (`Task.immediateDetached`) runs until its first
/// suspension before the sender goes on: a `.run` that ends without suspending (a persist, a log
/// line) costs no enqueue and no thread wake-up; one that suspends goes on like any effect. Held
/// back, not started in the reduce: started there, its body would run while the sender still holds
/// the store, and every action it sent back would have to queue.
///
/// Holds one start inline: the common case allocates nothing.
@usableFromInline package struct EffectStarts: Sendable {
  @usableFromInline var first: (job: any EffectJob, supervisor: EffectSupervisor)?
  /// NB: optional, so the common case touches no array at all.
  private var rest: [(job: any EffectJob, supervisor: EffectSupervisor)]?

  @inlinable init() {}

  /// Whether no task is held back.
  @inlinable var isEmpty: Bool { self.first == nil }

  mutating func append(_ job: any EffectJob, on supervisor: EffectSupervisor) {
    if self.first == nil {
      self.first = (job, supervisor)
    } else {
      if self.rest == nil { self.rest = [] }
      self.rest?.append((job, supervisor))
    }
  }

  /// Starts every task held back, in the order the reducer asked for them.
  ///
  /// Each runs on this thread until it suspends, unless the caller is itself the synchronous part
  /// of an effect started this way (a chain of effects each starting the next here would run
  /// nested on one thread, so those start as usual) or the store runs its effects on a test
  /// executor. An effect that has suspended since it started is nested in nothing, and starts
  /// the effects of its sends here like any other caller.
  @inlinable package func start() {
    if !self.isEmpty { self.startAll() }
  }

  /// Starts each task held back, in order.
  ///
  /// NB: every start goes through one loop, the common single one too: the optimizer inlines
  /// `Task.immediateDetached` into a loop and folds its `nil` executor preference away there.
  /// Called outside one, it was not inlined, and the task it made carried a preference record
  /// anyway, which every executor switch of the effect looked up under the task's status lock
  /// (seven acquisitions per session request; one now). `.ci/run` checks the binary.
  ///
  /// NB: nesting is a flag of the thread (a C `__thread` variable), set while a task started here
  /// runs its synchronous part, not a task-local read of ``EffectSupervisor/current``: a lookup
  /// that walks every task-local the sender's task binds (a server's handler binds several) on
  /// every request.
  @usableFromInline func startAll() {
    guard var next = self.first else { return }
    // NB: each task started here runs to its first suspension inside `Task.immediateDetached`, on
    // this thread; the flag covers the loop that makes those calls, and nothing else runs on this
    // thread meanwhile.
    let nested = cunidirectional_get_running_started_here() != 0
    if !nested { cunidirectional_set_running_started_here(1) }
    defer { if !nested { cunidirectional_set_running_started_here(0) } }
    let rest = self.rest ?? []
    var index = rest.startIndex
    while true {
      let (job, supervisor) = next
      if !nested, supervisor.executorPreference == nil, #available(macOS 26.0, *) {
        if !supervisor.startsInContext {
          Task.immediateDetached(priority: job.priority ?? .medium) {
            await job.runAsTask(on: supervisor)
          }
        } else if supervisor.inheritsTaskContext {
          Self.startImmediatelyInContext(job, on: supervisor)
        } else {
          // NB: an observed store's effect; `.ci/run` checks this call is inlined here.
          let body = supervisor.observedBody { await job.runAsTask(on: supervisor) }
          Task.immediateDetached(priority: job.priority ?? .medium) { await body() }
        }
      } else {
        job.startTask(on: supervisor)
      }
      guard index < rest.endIndex else { return }
      next = rest[index]
      index += 1
    }
  }

  /// Starts `job` on this thread as a child of the sender's context, in a store used in a test
  /// (see ``startEffectTask(priority:on:_:)``).
  @available(macOS 26.0, *)
  @inline(never)
  private static func startImmediatelyInContext(
    _ job: any EffectJob,
    on supervisor: EffectSupervisor
  ) {
    let body = supervisor.observedBody { await job.runAsTask(on: supervisor) }
    Task.immediate(priority: job.priority ?? .medium) { await body() }
  }
}

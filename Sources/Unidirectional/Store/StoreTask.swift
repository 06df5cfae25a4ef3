/// The lifetime of the effects one action started.
///
/// ``Store/send(_:fileID:filePath:line:column:)`` returns one. It covers every effect the action
/// started, the effects of the `.send` actions it triggered synchronously, and the effects of the
/// actions those effects fed back: everything that happened *because* of this action.
///
/// ```swift
/// let task = await store.send(.connect)     // a long-living effect
/// // ... when the client disconnects:
/// task.cancel()
/// await task.finish()                       // every effect of `.connect` has ended
/// ```
///
/// Cancelling the task that awaits ``finish(fileID:filePath:line:column:)`` cancels the effects too, so tying them to a
/// request, a connection or a command is `await store.send(.start).finish()` inside that scope.
public struct StoreTask: Hashable, Sendable {
  @usableFromInline let lifetime: (any EffectUnit)?
  @usableFromInline let supervisor: EffectSupervisor?

  /// A task for an action that started no effects.
  @usableFromInline
  init() {
    self.lifetime = nil
    self.supervisor = nil
  }

  @usableFromInline
  init(lifetime: any EffectUnit, supervisor: EffectSupervisor?) {
    self.lifetime = lifetime
    self.supervisor = supervisor
  }

  /// Suspends until every effect of this task has finished.
  ///
  /// Cancelling the task that is waiting cancels the effects, and `finish()` then returns once
  /// they have ended.
  ///
  /// Awaited from inside one of the effects it covers, it would wait for itself forever: it
  /// reports an issue naming the mistake and returns at once.
  ///
  /// - Parameters:
  ///   - fileID: The file ID of the location issues are reported at (the caller's).
  ///   - filePath: The file path of that source location.
  ///   - line: The line of that source location.
  ///   - column: The column of that source location.
  public func finish(
    fileID: StaticString = #fileID,
    filePath: StaticString = #filePath,
    line: UInt = #line,
    column: UInt = #column
  ) async {
    guard let lifetime = self.lifetime, let supervisor = self.supervisor else { return }
    if supervisor.isRunningUnit(of: lifetime) {
      reportIssue(
        """
        'StoreTask.finish()' was awaited from inside one of the effects it waits for.

        The effect would wait for itself to end and never return, so 'finish()' returned at \
        once. Await the task from outside its effects, or cancel it ('cancel()') instead.
        """,
        fileID: "\(fileID)",
        filePath: "\(filePath)",
        line: Int(line),
        column: Int(column)
      )
      return
    }
    await withTaskCancellationHandler {
      await supervisor.wait(for: lifetime)
    } onCancel: {
      supervisor.cancel(lifetime: lifetime)
    }
  }

  /// Cancels every effect of this task (and any it starts later).
  ///
  /// The store drops every action those effects send from now on; their work observes
  /// `Task.isCancelled`.
  public func cancel() {
    guard let lifetime = self.lifetime, let supervisor = self.supervisor else { return }
    supervisor.cancel(lifetime: lifetime)
  }

  /// Whether ``cancel()`` was called.
  ///
  /// A task for an action that started no effects has nothing to run and reports `true`, as in
  /// the Composable Architecture.
  public var isCancelled: Bool {
    self.lifetime?.isLifetimeCancelled ?? true
  }

  /// Whether every effect of this task has finished (`true` when it started none).
  public var isFinished: Bool {
    guard let lifetime = self.lifetime, let supervisor = self.supervisor else { return true }
    return supervisor.isFinished(lifetime)
  }

  /// Two tasks are equal when they refer to the effects of the same action.
  public static func == (lhs: Self, rhs: Self) -> Bool {
    lhs.lifetime === rhs.lifetime
  }

  /// Hashes the identity of the action's effects.
  public func hash(into hasher: inout Hasher) {
    hasher.combine(self.lifetime.map(ObjectIdentifier.init))
  }
}

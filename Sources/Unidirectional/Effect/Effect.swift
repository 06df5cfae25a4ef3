/// A description of work a reducer wants done, which feeds its results back as actions.
///
/// A reducer never performs side effects itself; it returns an `Effect`, and the ``Store`` runs
/// it. Building an effect does nothing. Effects are values: merge them to run concurrently,
/// concatenate them to run one after another, and make them cancellable by an identifier.
///
/// ```swift
/// case .searchChanged(let query):
///   state.query = query
///   return .run { send in
///     try await clock.sleep(for: .milliseconds(300))
///     await send(.searchResponse(try await api.search(query)))
///   }
///   .cancellable(id: CancelID.search, cancelInFlight: true)
/// ```
///
/// An effect is also an `AsyncSequence` of its actions: iterating one outside a store runs it,
/// which is handy in plain code and tests (`for await action in effect { ... }`).
///
/// > Important: ``none`` and ``send(_:)`` are handled synchronously by the store, before
/// > ``Store/send(_:fileID:filePath:line:column:)`` returns, without creating tasks.
public struct Effect<Action: Sendable>: Sendable {
  // NB: a `var` only so that the planner can move it out of the reducer's effect
  // (`EffectPlanner.plan(taking:delivery:supervisor:action:enqueue:)`).
  @usableFromInline var operation: Operation

  @inlinable init(operation: Operation) {
    self.operation = operation
  }

  // NB: `@usableFromInline` so `.none` and `.send` are specialized in the feature's module,
  // which keeps generic metadata lookups off the per-action path.
  @usableFromInline enum Operation: Sendable {
    /// No work.
    case none
    /// An action delivered synchronously by the store.
    case send(Action)
    /// Asynchronous work that may send any number of actions.
    case run(RunOperation<Action>)
    /// An action sent after a delay, or at every interval: a record in a timer queue.
    ///
    /// NB: a class: inline, its clock and durations made every `Effect` (and so every reduce,
    /// which returns one) several words larger, and every `send` moved them. The
    /// store that arms it takes the instance as its timer record when nothing else holds it.
    /// `keyed`: whether the identifier folded into it (by the first `.cancellable`) applies.
    /// `marked`: whether ``Effect/cancelledOnShutdown()`` was applied to it, folded in here
    /// rather than boxed as ``cancelledOnShutdown(_:)`` (an allocation per idle-timer re-arm).
    case timer(TimerOperation<Action>, keyed: Bool, marked: Bool)
    /// Cancels the effects registered under these identifiers.
    case cancel([CancelKey])
    /// The inner effect, registered under an identifier.
    indirect case cancellable(CancelKey, cancelInFlight: Bool, Effect)
    /// Effects run concurrently (never empty, never a single element).
    case merge([Effect])
    /// Effects run one after another (never empty, never a single element).
    case concatenate([Effect])
    /// The inner effect, run after the effects queued before it under the same identifier.
    indirect case queued(CancelKey, Effect)
    /// The inner effect, cancelled as soon as a graceful shutdown begins (and not started once it
    /// has): its units carry ``UnitFlags/cancelledOnShutdown``.
    indirect case cancelledOnShutdown(Effect)
    /// An effect decided when the store registers it, from per-store state (throttling).
    case deferred(@Sendable (EffectSupervisor) -> Effect)
  }
}

/// The asynchronous body of a ``Effect/run(priority:operation:catch:fileID:filePath:line:column:)``
/// effect, with its error handling already folded in.
///
/// NB: the priority is kept as its raw value. `TaskPriority` comes from a module built for
/// library evolution, so its layout is opaque to other modules; storing one made `Effect`
/// address-only in every feature's module, where each `Effect` was then copied, switched on and
/// destroyed through its value witnesses.
@usableFromInline struct RunOperation<Action: Sendable>: Sendable {
  @usableFromInline var rawPriority: UInt8?
  @usableFromInline var body: @concurrent @Sendable (Send<Action>) async -> Void

  @usableFromInline
  init(priority: TaskPriority?, body: @escaping @concurrent @Sendable (Send<Action>) async -> Void)
  {
    self.rawPriority = priority?.rawValue
    self.body = body
  }

  @usableFromInline var priority: TaskPriority? {
    self.rawPriority.map(TaskPriority.init(rawValue:))
  }

  /// The same work, its actions transformed.
  func map<NewAction: Sendable>(
    _ transform: @escaping @Sendable (Action) -> NewAction
  ) -> RunOperation<NewAction> {
    let body = self.body
    return RunOperation<NewAction>(priority: self.priority) { send in
      await body(Send { action in await send(transform(action)) })
    }
  }
}

// MARK: - Creating effects

extension Effect {
  /// An effect that does nothing.
  ///
  /// The store handles it without creating a task or allocating.
  @inlinable public static var none: Self {
    Self(operation: .none)
  }

  /// An effect that immediately feeds an action back into the store.
  ///
  /// The store reduces the action synchronously, before the `send` that caused it returns, in an
  /// iterative loop (chains of any length do not grow the stack). Prefer calling shared logic
  /// directly over sending actions to share it.
  ///
  /// - Parameter action: The action to feed back.
  /// - Returns: An effect that sends `action` at once.
  @inlinable public static func send(_ action: Action) -> Self {
    Self(operation: .send(action))
  }

  /// An effect that runs asynchronous work which may send any number of actions.
  ///
  /// The body runs off the store (it is `@concurrent`), in a task the store that started it owns
  /// (counts, cancels and waits for), so CPU-heavy work never blocks other actions. Throwing
  /// `CancellationError` ends the effect quietly. Any other error goes to `handler`; without a
  /// handler it is reported as an issue (a test failure under a test).
  ///
  /// ```swift
  /// return .run { send in
  ///   for await event in await events.stream() {
  ///     await send(.event(event))
  ///   }
  /// } catch: { error, send in
  ///   await send(.failed(error.localizedDescription))
  /// }
  /// ```
  ///
  /// - Parameters:
  ///   - priority: The priority of the task running the body; `nil` inherits the store's.
  ///   - operation: The work. `send` feeds actions back; each `await send(action)` returns once
  ///     the store has reduced the action.
  ///   - handler: Turns an error thrown by `operation` into actions.
  ///   - fileID: The file ID of the location issues are reported at (the caller's).
  ///   - filePath: The file path of that source location.
  ///   - line: The line of that source location.
  ///   - column: The column of that source location.
  /// - Returns: An effect that runs `operation` when the store starts it.
  ///
  /// NB: inlinable, so it is specialized in the feature's module: generic, building the effect
  /// looked up its type's metadata at run time.
  @inlinable
  public static func run(
    priority: TaskPriority? = nil,
    operation: @escaping @concurrent @Sendable (_ send: Send<Action>) async throws -> Void,
    catch handler: (
      @concurrent @Sendable (_ error: any Error, _ send: Send<Action>) async -> Void
    )? =
      nil,
    fileID: StaticString = #fileID,
    filePath: StaticString = #filePath,
    line: UInt = #line,
    column: UInt = #column
  ) -> Self {
    let dependencies = DependencyValues._inherited()
    let run: @concurrent @Sendable (Send<Action>) async -> Void = { send in
      do {
        try await operation(send)
      } catch is CancellationError {
        return
      } catch {
        if !Task.isCancelled { recordEffectFailure(error) }
        if let handler {
          await handler(error, send)
        } else if !Task.isCancelled {
          reportUncaughtError(error, fileID: fileID, filePath: filePath, line: line, column: column)
        }
      }
    }
    return .run(priority: priority, body: run, under: dependencies)
  }

  /// An effect that runs asynchronous work which may send any number of actions and throws no
  /// error.
  ///
  /// The same as ``run(priority:operation:catch:fileID:filePath:line:column:)`` for a body that
  /// cannot throw, which Swift picks for such a body: with no error to catch or report, the body
  /// runs as it is, with no wrapper around it.
  ///
  /// ```swift
  /// return .run { [snapshot = state] _ in
  ///   await audit.record(snapshot)
  /// }
  /// ```
  ///
  /// - Parameters:
  ///   - priority: The priority of the task running the body; `nil` inherits the store's.
  ///   - operation: The work. `send` feeds actions back; each `await send(action)` returns once
  ///     the store has reduced the action.
  ///   - fileID: The file ID of the caller (kept for the same call shape as the throwing form).
  ///   - filePath: The file path of the caller.
  ///   - line: The line of the caller.
  ///   - column: The column of the caller.
  /// - Returns: An effect that runs `operation` when the store starts it.
  ///
  /// NB: a wrapper closure around every `.run` body was an allocation, an async frame of 176 B
  /// and a catch per effect; a session request's persist `.run` paid for an error it cannot throw.
  @inlinable
  public static func run(
    priority: TaskPriority? = nil,
    operation: @escaping @concurrent @Sendable (_ send: Send<Action>) async -> Void,
    fileID: StaticString = #fileID,
    filePath: StaticString = #filePath,
    line: UInt = #line,
    column: UInt = #column
  ) -> Self {
    .run(priority: priority, body: operation, under: DependencyValues._inherited())
  }

  /// A `.run` of `body`, which runs under `dependencies` (those in force where the effect was
  /// built).
  ///
  /// NB: binding dependencies costs a frame and a task-local push per effect; skipped when they
  /// are the defaults (the store binds its own around the reducer, which is where
  /// `DependencyValues.current` was read).
  @inlinable
  static func run(
    priority: TaskPriority?,
    body: @escaping @concurrent @Sendable (Send<Action>) async -> Void,
    under dependencies: DependencyValues
  ) -> Self {
    let bound: @concurrent @Sendable (Send<Action>) async -> Void
    if dependencies.isDefault {
      bound = body
    } else {
      bound = { send in await dependencies.bind { await body(send) } }
    }
    return Self(operation: .run(RunOperation(priority: priority, body: bound)))
  }

  /// An effect that runs an asynchronous sequence and sends each of its elements.
  ///
  /// A thrown `CancellationError` ends the effect quietly; any other error is reported as an
  /// issue.
  ///
  /// - Parameters:
  ///   - sequence: The actions to send, in order.
  ///   - priority: The priority of the task iterating the sequence.
  ///   - fileID: The file ID of the location issues are reported at (the caller's).
  ///   - filePath: The file path of that source location.
  ///   - line: The line of that source location.
  ///   - column: The column of that source location.
  /// - Returns: An effect that iterates `sequence` when the store starts it.
  public static func run<S: AsyncSequence & Sendable>(
    _ sequence: S,
    priority: TaskPriority? = nil,
    fileID: StaticString = #fileID,
    filePath: StaticString = #filePath,
    line: UInt = #line,
    column: UInt = #column
  ) -> Self where S.Element == Action {
    .run(
      priority: priority,
      operation: { send in
        for try await action in sequence {
          await send(action)
        }
      },
      fileID: fileID,
      filePath: filePath,
      line: line,
      column: column
    )
  }

  /// Creates an effect from an asynchronous sequence of actions.
  ///
  /// The same as ``run(_:priority:fileID:filePath:line:column:)``.
  public init<S: AsyncSequence & Sendable>(
    _ sequence: S,
    fileID: StaticString = #fileID,
    filePath: StaticString = #filePath,
    line: UInt = #line,
    column: UInt = #column
  ) where S.Element == Action {
    self = .run(sequence, fileID: fileID, filePath: filePath, line: line, column: column)
  }

  /// An effect that runs asynchronous work and sends nothing ("fire and forget").
  ///
  /// - Parameters:
  ///   - priority: The priority of the task running `work`.
  ///   - fileID: The file ID of the location issues are reported at (the caller's).
  ///   - filePath: The file path of that source location.
  ///   - line: The line of that source location.
  ///   - column: The column of that source location.
  ///   - work: The work. Errors other than `CancellationError` are reported as issues.
  /// - Returns: An effect that runs `work` when the store starts it.
  public static func fireAndForget(
    priority: TaskPriority? = nil,
    fileID: StaticString = #fileID,
    filePath: StaticString = #filePath,
    line: UInt = #line,
    column: UInt = #column,
    _ work: @escaping @concurrent @Sendable () async throws -> Void
  ) -> Self {
    .run(
      priority: priority,
      operation: { _ in try await work() },
      fileID: fileID,
      filePath: filePath,
      line: line,
      column: column
    )
  }
}

/// Tells the store's observer (if any) that the effect running in this task threw `error`.
///
/// NB: not inlined into the effect's body, whose async frame every suspended effect keeps.
@usableFromInline @inline(never)
func recordEffectFailure(_ error: any Error) {
  EffectSupervisor.current?.recordFailure(error)
}

/// Reports an error an `Effect.run` threw with no `catch` handler.
///
/// NB: not inlined into the effect's body, whose async frame every suspended effect keeps.
@usableFromInline @inline(never)
func reportUncaughtError(
  _ error: any Error,
  fileID: StaticString,
  filePath: StaticString,
  line: UInt,
  column: UInt
) {
  let action = EffectSupervisor.current?.currentEffectAction()
  reportIssue(
    """
    An 'Effect.run' threw an error and has no 'catch' handler.

      Error:
        \(error) (\(String(reflecting: type(of: error))))

      Effect:
        started at \(fileID):\(line)\(action.map { " by the action\n    \($0)" } ?? "")

    Handle the error with 'catch: { error, send in ... }' or catch it in the body. Throwing \
    'CancellationError' ends an effect quietly.
    """,
    fileID: "\(fileID)",
    filePath: "\(filePath)",
    line: Int(line),
    column: Int(column)
  )
}

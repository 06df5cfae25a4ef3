// MARK: - Composing effects

extension Effect {
  /// Runs effects concurrently.
  ///
  /// All the effects are kept; `.none`s are dropped, so merging only `.none`s is `.none`.
  /// The store starts the parts in the order given: in `.merge(work.cancellable(id: X),
  /// .cancel(id: X))` the work is registered first and cancelled before it ever runs.
  ///
  /// - Parameter effects: The effects to run.
  /// - Returns: One effect that finishes when all of them have finished.
  @inlinable
  public static func merge(_ effects: Self...) -> Self {
    // NB: inlinable, and the common case (no `.none`, no nested merge) keeps the argument array:
    // forwarding to the generic `Sequence` overload cost every merge generic-metadata lookups and
    // a copy.
    for effect in effects {
      switch effect.operation {
      case .none, .merge: return .merge(effects as [Self])
      default: continue
      }
    }
    switch effects.count {
    case 0: return .none
    case 1: return effects[0]
    default: return Self(operation: .merge(effects))
    }
  }

  /// Runs a sequence of effects concurrently.
  ///
  /// - Parameter effects: The effects to run.
  /// - Returns: One effect that finishes when all of them have finished.
  public static func merge(_ effects: some Sequence<Self>) -> Self {
    var parts: [Self] = []
    for effect in effects {
      switch effect.operation {
      case .none:
        continue
      case .merge(let nested):
        parts.append(contentsOf: nested)
      default:
        parts.append(effect)
      }
    }
    switch parts.count {
    case 0: return .none
    case 1: return parts[0]
    default: return Self(operation: .merge(parts))
    }
  }

  /// Runs this effect and another one concurrently.
  ///
  /// - Parameter other: The effect to run alongside this one.
  /// - Returns: One effect that finishes when both have finished.
  @inlinable  // NB: specialized where it is used: composition reducers merge on every action.
  public func merge(with other: Self) -> Self {
    switch (self.operation, other.operation) {
    case (.none, _): return other
    case (_, .none): return self
    default: return .merge([self, other])
    }
  }

  /// Runs effects one after another.
  ///
  /// Each effect starts when the previous one has finished (or was cancelled). Synchronous
  /// leading parts (`.send`, `.cancel`) are handled before `send` returns; everything after the
  /// first asynchronous part runs in order afterwards.
  ///
  /// - Parameter effects: The effects to run, in order.
  /// - Returns: One effect that finishes when the last one has finished.
  public static func concatenate(_ effects: Self...) -> Self {
    .concatenate(effects)
  }

  /// Runs a sequence of effects one after another.
  ///
  /// - Parameter effects: The effects to run, in order.
  /// - Returns: One effect that finishes when the last one has finished.
  public static func concatenate(_ effects: some Sequence<Self>) -> Self {
    var parts: [Self] = []
    for effect in effects {
      switch effect.operation {
      case .none:
        continue
      case .concatenate(let nested):
        parts.append(contentsOf: nested)
      default:
        parts.append(effect)
      }
    }
    switch parts.count {
    case 0: return .none
    case 1: return parts[0]
    default: return Self(operation: .concatenate(parts))
    }
  }

  /// Runs this effect, then another one.
  ///
  /// - Parameter next: The effect to run after this one has finished.
  /// - Returns: One effect that runs both in order.
  public func concatenate(with next: Self) -> Self {
    .concatenate([self, next])
  }

  /// Transforms the actions of this effect, for example to embed a child feature's actions into
  /// its parent's.
  ///
  /// - Parameter transform: Turns each action this effect sends into another action.
  /// - Returns: An effect that runs this one and sends the transformed actions.
  public func map<NewAction: Sendable>(
    _ transform: @escaping @Sendable (Action) -> NewAction
  ) -> Effect<NewAction> {
    switch self.operation {
    case .none:
      return .none
    case .send(let action):
      return .send(transform(action))
    case .run(let run):
      return Effect<NewAction>(operation: .run(run.map(transform)))
    case .timer(let timer, let keyed, let marked):
      return Effect<NewAction>(
        operation: .timer(timer.map(transform, keyed: keyed), keyed: keyed, marked: marked)
      )
    case .cancel(let keys):
      return Effect<NewAction>(operation: .cancel(keys))
    case .cancellable(let key, let cancelInFlight, let effect):
      return Effect<NewAction>(
        operation: .cancellable(key, cancelInFlight: cancelInFlight, effect.map(transform))
      )
    case .merge(let effects):
      return Effect<NewAction>(operation: .merge(effects.map { $0.map(transform) }))
    case .concatenate(let effects):
      return Effect<NewAction>(operation: .concatenate(effects.map { $0.map(transform) }))
    case .queued(let key, let effect):
      return Effect<NewAction>(operation: .queued(key, effect.map(transform)))
    case .cancelledOnShutdown(let effect):
      return Effect<NewAction>(operation: .cancelledOnShutdown(effect.map(transform)))
    case .deferred(let make):
      return Effect<NewAction>(operation: .deferred { make($0).map(transform) })
    }
  }
}

/// Waiting for lifetimes and for the store to be idle, and shutting down.
extension EffectSupervisor {
  /// Whether the calling task runs one of `lifetime`'s units: waiting for the lifetime there would
  /// wait for itself.
  func isRunningUnit(of lifetime: any EffectUnit) -> Bool {
    guard self.isCurrentEffect else { return false }
    return withUnsafeCurrentTask { task in
      guard let task else { return false }
      return self.guarded.withLock {
        $0.machine.lifetime(lifetime, hasUnitRunningWhere: { $0.isRunning(task) })
      }
    }
  }

  /// Suspends until every unit of `lifetime` has finished.
  func wait(for lifetime: any EffectUnit) async {
    if self.isFinished(lifetime) { return }
    await withUnsafeContinuation { continuation in
      self.guarded.withLock { $0.machine.wait(for: lifetime, continuation) }?.resume()
    }
  }

  func isFinished(_ lifetime: any EffectUnit) -> Bool {
    self.guarded.withLock { $0.machine.isFinished(lifetime) }
  }

  /// Suspends until no unit is live, or the waiting task is cancelled.
  func waitUntilIdle() async {
    let ticket = self.guarded.withLock { $0.machine.makeIdleTicket() }
    await withTaskCancellationHandler {
      await withUnsafeContinuation { (continuation: UnsafeContinuation<Void, Never>) in
        self.guarded.withLock {
          $0.machine.waitUntilIdle(continuation, ticket: ticket, cancelled: Task.isCancelled)
        }?.resume()
      }
    } onCancel: {
      self.guarded.withLock { $0.machine.abandonIdleWait(ticket: ticket) }?.resume()
    }
  }

  /// Suspends until no unit is live and no effect task is alive, even if the waiting task is
  /// cancelled (shutting down: the store's tasks must not outlive it).
  func waitUntilEnded() async {
    let ticket = self.guarded.withLock { $0.machine.makeIdleTicket() }
    await withUnsafeContinuation { (continuation: UnsafeContinuation<Void, Never>) in
      self.guarded.withLock {
        $0.machine.waitUntilIdle(continuation, ticket: ticket, cancelled: false)
      }?.resume()
    }
  }

  /// Stops accepting work and cancels every effect; ``waitUntilEnded()`` then waits for their
  /// tasks.
  ///
  /// - Returns: `true` when no effect task is alive: none will end to run `effectsEnded`, so the
  ///   caller, on the store's executor, lets go of what effects needed itself.
  @usableFromInline @discardableResult
  func shutDown() -> Bool {
    let shutDown = self.guarded.withLock { $0.machine.shutDown() }
    self.perform(shutDown.cancellation)
    return shutDown.ended
  }

  /// ``shutDown()`` for callers off the store's executor (a store's `deinit`, the test store's
  /// teardown): when no effect task is alive, `effectsEnded` runs in a task of its own.
  @usableFromInline
  func shutDownOffTheStore() {
    guard self.shutDown() else { return }
    let effectsEnded = self.effectsEnded
    if let executorPreference = self.executorPreference {
      Task.detached(executorPreference: executorPreference) { await effectsEnded() }
    } else {
      Task.detached { await effectsEnded() }
    }
  }

  var isShutDown: Bool {
    self.guarded.withLock { $0.machine.phase == .shutDown }
  }
}

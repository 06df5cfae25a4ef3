extension RootCore {
  // MARK: - Shutting down in phases (a graceful shutdown, alone or in a group)

  /// Rejects later sends (their actions are not reduced; effects' actions still are); `false` if
  /// the store was already closed.
  @usableFromInline func closeForShutdown() -> Bool {
    guard !self.isClosed else { return false }
    self.close()
    self.supervisor?.beginDraining()
    return true
  }

  /// The clock a graceful shutdown measures its grace period on by default.
  @usableFromInline var shutdownClock: any Clock<Duration> {
    self.dependencies.values.continuousClock
  }

  /// Cancels every effect; their actions are no longer reduced.
  @usableFromInline func cancelForShutdown() {
    self.hasShutDown = true
    // NB: when no effect task is alive none will let go of the core: do it here, on its executor.
    if self.supervisor?.shutDown() == true { self.releaseFromEffects() }
  }

  /// Ends a graceful shutdown: lets effects' deliveries go once they have ended, or reports the
  /// ones that ignored cancellation, and tells the observer.
  @usableFromInline func completeShutdown(effectsEnded: Bool, gracePeriod: Duration) {
    defer { self.notifyShutDown() }
    guard let supervisor = self.supervisor else { return }
    if effectsEnded {
      self.releaseFromEffects()
      return
    }
    let count = supervisor.liveCount
    self.reporter(
      ReportedIssue(
        """
        \(count == 1 ? "1 effect" : "\(count) effects") ignored cancellation and \
        \(count == 1 ? "is" : "are") still running after 'shutdown(gracePeriod: \(gracePeriod))'.

        Shutdown returned instead of waiting for \(count == 1 ? "it" : "them"). An effect \
        should end when its task is cancelled: check 'Task.isCancelled' in loops, and do not \
        swallow 'CancellationError'.
        """
      )
    )
  }

  /// Rejects later sends and ends the `states` sequences.
  func close() {
    guard !self.isClosed else { return }
    self.isClosed = true
    self.broadcaster?.finish()
  }
}

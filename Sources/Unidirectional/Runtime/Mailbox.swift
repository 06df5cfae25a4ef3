/// Jobs handed to a task that runs them as children of its task group, and that task's parked
/// continuation when it has nothing to do.
///
/// A pure value: its owner keeps it behind a lock and performs what the methods return (resume the
/// returned waiter) after releasing it. The root task's mailbox lives in the
/// ``EffectStateMachine``; each shard keeps its own in a ``LockedBox``.
struct Mailbox<Job, Waiter> {
  private var jobs: [Job] = []
  private var waiter: Waiter?
  private(set) var isClosed = false

  /// What ``take(into:)`` found.
  enum Take: Equatable {
    /// Jobs were moved into the batch.
    case jobs
    /// Nothing to run: park with ``park(_:)``.
    case empty
    /// Closed and empty: the consumer should end.
    case closed
  }

  /// Appends jobs (emptying `new`, keeping its capacity); returns the parked consumer to resume.
  mutating func post(_ new: inout [Job]) -> Waiter? {
    precondition(!self.isClosed, "Jobs posted to a closed mailbox.")
    if self.jobs.isEmpty {
      swap(&self.jobs, &new)
    } else {
      self.jobs.append(contentsOf: new)
      new.removeAll(keepingCapacity: true)
    }
    return self.takeWaiter()
  }

  /// Appends one job; returns the parked consumer to resume.
  mutating func post(_ job: Job) -> Waiter? {
    precondition(!self.isClosed, "A job posted to a closed mailbox.")
    self.jobs.append(job)
    return self.takeWaiter()
  }

  /// No more jobs will come; the consumer still takes the pending ones.
  ///
  /// Returns the parked consumer to resume.
  mutating func close() -> Waiter? {
    self.isClosed = true
    return self.takeWaiter()
  }

  /// Removes the jobs not taken yet (they will not run).
  mutating func removeAll() -> [Job] {
    defer { self.jobs = [] }
    return self.jobs
  }

  /// Moves the pending jobs into `batch` (which must be empty).
  mutating func take(into batch: inout [Job]) -> Take {
    if !self.jobs.isEmpty {
      swap(&batch, &self.jobs)
      return .jobs
    }
    return self.isClosed ? .closed : .empty
  }

  /// Parks the consumer; returns it instead when it should not wait (jobs arrived since it looked,
  /// or the mailbox closed).
  mutating func park(_ waiter: Waiter) -> Waiter? {
    precondition(self.waiter == nil, "Two consumers parked on one mailbox.")
    if !self.jobs.isEmpty || self.isClosed { return waiter }
    self.waiter = waiter
    return nil
  }

  private mutating func takeWaiter() -> Waiter? {
    defer { self.waiter = nil }
    return self.waiter
  }
}

extension Mailbox: Sendable where Job: Sendable, Waiter: Sendable {}

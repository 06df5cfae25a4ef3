import Synchronization

/// One task's wait in a clock's timer queue: a record the queue holds until its deadline, when
/// the queue's driver resumes the waiting task.
///
/// `clock.timer(interval:)` waits this way on the clocks the runtime keeps a timer service for
/// (``timerHost(for:)``, but a ``TestClock``): a timer loop asleep between ticks is then a
/// record in the queue its store's `.send(after:)` timers share, not a `Task.sleep`, which makes
/// a task of its own per wait and leaves a timer in the global executor until its deadline even
/// once cancelled (with many ticking stores, the executor's timer heap weighed on a shutdown).
/// A cancelled wait leaves the queue at once.
///
/// One record serves every tick of its loop: it is queued again once it fired, never once
/// cancelled.
///
/// NB: `continuation` is written by the waiting task before it publishes `waiting` (a releasing
/// exchange), and read and cleared only by the one thread whose acquiring exchange then moves
/// `waiting` to `done` (the queue's driver firing, or a canceller); the next wait writes it after
/// that resumption, which orders it. `deadline` is written here only while the record is not
/// queued, before the arming that takes the host's lock.
// Safety: `state` is atomic and `continuation` passes between threads as the note above says;
// the entry's own fields follow `TimerEntry`'s rules.
final class QueuedWait: TimerEntry, @unchecked Sendable {
  private static let idle: UInt8 = 0
  private static let waiting: UInt8 = 1
  private static let done: UInt8 = 2

  private let state = Atomic<UInt8>(QueuedWait.idle)
  private var continuation: UnsafeContinuation<Bool, Never>?

  init(host: any TimerHost) {
    super.init(lifetime: nil, host: host, deadline: .zero)
  }

  /// Waits until the host's clock reaches `deadline` (on the host's timeline); `false`, at once,
  /// when the task is cancelled first or meanwhile, or the record was cancelled before.
  ///
  /// One wait at a time: the caller waits again only once the previous wait has returned.
  func wait(until deadline: Duration) async -> Bool {
    // NB: a cancellation that lost the race with a firing still marked the record; the task is
    // cancelled, so it waits no more.
    guard !self.isCancelled else { return false }
    self.deadline = deadline
    self.state.store(Self.idle, ordering: .releasing)
    return await withTaskCancellationHandler {
      await withUnsafeContinuation { continuation in
        self.continuation = continuation
        let (published, _) = self.state.compareExchange(
          expected: Self.idle,
          desired: Self.waiting,
          ordering: .acquiringAndReleasing
        )
        guard published else {
          // Cancelled before it was queued: the canceller left the resumption to this task.
          self.continuation = nil
          continuation.resume(returning: false)
          return
        }
        // NB: a cancellation from here on finds `waiting`; arming checks the cancelled flag under
        // the host's lock, and the canceller sets it before it disarms, so the record is either
        // never queued or removed.
        self.host.arm(self)
      }
    } onCancel: {
      self.cancel()
    }
  }

  /// The host popped the record: its deadline has come.
  override func fire(on host: any TimerHost) async {
    self.resume(returning: true)
  }

  private func cancel() {
    self.insertFlags(UnitFlags.cancelled)
    while true {
      switch self.state.load(ordering: .acquiring) {
      case Self.idle:
        // Not published yet: the waiting task sees `done` and resumes itself.
        if self.state.compareExchange(
          expected: Self.idle,
          desired: Self.done,
          ordering: .acquiringAndReleasing
        ).exchanged {
          return
        }
      case Self.waiting:
        self.host.disarm(self)
        self.resume(returning: false)
        return
      default:
        return
      }
    }
  }

  /// Resumes the waiting task, once: the firing and a cancellation may race, and one of them
  /// wins.
  private func resume(returning fired: Bool) {
    guard
      self.state.compareExchange(
        expected: Self.waiting,
        desired: Self.done,
        ordering: .acquiringAndReleasing
      ).exchanged
    else { return }
    let continuation = self.continuation.unsafelyUnwrapped
    self.continuation = nil
    continuation.resume(returning: fired)
  }
}

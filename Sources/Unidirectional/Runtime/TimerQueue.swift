/// A binary min-heap of timer entries by (deadline, arming order) that knows each entry's place,
/// so a cancelled timer leaves at once (O(log n)) instead of lingering until its deadline.
///
/// Each slot holds the key its entry was placed under: the entry's deadline and arming order
/// then. A re-arm to a later deadline (an idle timer restarted by every request) updates only the
/// entry's own deadline and arming order and leaves the heap alone: the slot's key is then stale,
/// and earlier than the entry's. When a stale slot reaches the top, it takes the entry's key and
/// sinks to its place. Since no key is later than its entry's, a top whose key is its entry's is
/// the entry due first, so entries still leave in exact (deadline, arming order), and a re-arm
/// costs no sift however many timers the heap holds.
///
/// A plain value: the host guards it with its lock. `TimerQueueTests` drive it directly.
struct TimerQueue {
  /// An entry and the key it is placed under: its deadline and arming order then.
  ///
  /// NB: the key sits in the heap's buffer, so a sift compares neighbours without loading each
  /// entry (a session's timer lives in a heap of every session's timers). In the entry, the
  /// arming order would have taken the one-shot timer's record to its next size (128 to 144 B).
  private struct Slot {
    var deadline: Duration
    var sequence: UInt64
    let entry: TimerEntry

    /// The slot of `entry` keyed by its own deadline and arming order.
    init(placing entry: TimerEntry) {
      self.deadline = entry.deadline
      self.sequence = entry.sequence
      self.entry = entry
    }

    // NB: deadlines compare as their attoseconds: `Duration`'s own operators are calls into the
    // standard library, around which each sift step retained and released the entries it
    // compared (a cache miss on each, in a heap of every session's timers).
    @inline(__always)
    func isBefore(_ other: Slot) -> Bool {
      let (mine, theirs) = (self.deadline.attoseconds, other.deadline.attoseconds)
      return mine < theirs || (mine == theirs && self.sequence < other.sequence)
    }

    /// Whether the entry was re-armed later since it was placed here.
    @inline(__always)
    var isStale: Bool {
      self.deadline.attoseconds != self.entry.deadline.attoseconds
        || self.sequence != self.entry.sequence
    }
  }

  private var slots: [Slot] = []
  private var nextSequence: UInt64 = 0

  var count: Int { self.slots.count }
  var isEmpty: Bool { self.slots.isEmpty }

  /// When the host must look at the queue next: the top's key, which is never later than the
  /// earliest entry's deadline (it is that deadline once ``popDue(by:into:)`` has run).
  var nextDeadline: Duration? { self.slots.first?.deadline }

  /// Queues `entry` behind every entry with the same deadline queued before it.
  mutating func insert(_ entry: TimerEntry) {
    precondition(entry.heapIndex < 0, "A timer was armed twice.")
    entry.sequence = self.nextSequence
    self.nextSequence &+= 1
    entry.heapIndex = self.slots.count
    self.slots.append(Slot(placing: entry))
    self.siftUp(entry.heapIndex)
  }

  /// Moves a queued `entry` to `deadline`, behind every entry with that deadline queued before
  /// (a new arming order); `false` if it is not queued here.
  ///
  /// A later deadline leaves the heap as it is (the slot's key goes stale); an earlier one
  /// moves the slot up at once.
  @discardableResult
  mutating func reschedule(_ entry: TimerEntry, to deadline: Duration) -> Bool {
    guard self.contains(entry) else { return false }
    entry.deadline = deadline
    entry.sequence = self.nextSequence
    self.nextSequence &+= 1
    let index = entry.heapIndex
    if deadline.attoseconds < self.slots[index].deadline.attoseconds {
      self.slots[index] = Slot(placing: entry)
      self.siftUp(index)
    }
    return true
  }

  /// Whether `entry` is queued here.
  func contains(_ entry: TimerEntry) -> Bool {
    let index = entry.heapIndex
    return index >= 0 && index < self.slots.count && self.slots[index].entry === entry
  }

  /// Removes `entry`; `false` if it was not queued here.
  @discardableResult
  mutating func remove(_ entry: TimerEntry) -> Bool {
    guard self.contains(entry) else { return false }
    self.removeSlot(at: entry.heapIndex)
    return true
  }

  /// Removes every entry due by `now` into `due`, earliest first, and leaves the top keyed by its
  /// entry's own deadline.
  mutating func popDue(by now: Duration, into due: inout [TimerEntry]) {
    while let top = self.settledTop(), top.deadline.attoseconds <= now.attoseconds {
      self.removeSlot(at: 0)
      due.append(top.entry)
    }
  }

  /// Removes and returns the earliest entry.
  mutating func popFirst() -> TimerEntry? {
    guard let top = self.settledTop() else { return nil }
    self.removeSlot(at: 0)
    return top.entry
  }

  /// The top slot once every stale slot that reached it has taken its entry's key and sunk.
  ///
  /// NB: each sink settles one stale key, and a key goes stale only by a re-arm, so the sinks
  /// are paid for by the re-arms that skipped the heap.
  private mutating func settledTop() -> Slot? {
    while let top = self.slots.first {
      guard top.isStale else { return top }
      self.slots[0] = Slot(placing: top.entry)
      self.siftDown(0)
    }
    return nil
  }

  private mutating func removeSlot(at index: Int) {
    let last = self.slots.count - 1
    let removed = self.slots[index].entry
    if index != last {
      // NB: through the buffer, as the sifts below: the array's `swapAt` copied both slots,
      // retaining and releasing their entries under the host's lock (a group shutdown removes a
      // slot per store).
      self.slots.withUnsafeMutableBufferPointer { $0.swapAt(index, last) }
      self.slots[index].entry.heapIndex = index
    }
    self.slots.removeLast()
    removed.heapIndex = -1
    if index < self.slots.count {
      self.siftDown(index)
      self.siftUp(index)
    }
  }

  // NB: the sifts move slots through the array's buffer instead of swapping elements: swapping
  // retained and released each entry it moved, under the host's lock. The slot sifted is taken
  // out once and put back once, and each slot it passes moves one place, its entry's index
  // updated.

  private mutating func siftUp(_ start: Int) {
    self.slots.withUnsafeMutableBufferPointer { heap in
      guard let base = heap.baseAddress, start > 0 else { return }
      let slot = (base + start).move()
      var hole = start
      while hole > 0 {
        let parent = (hole - 1) / 2
        guard slot.isBefore(base[parent]) else { break }
        (base + hole).moveInitialize(from: base + parent, count: 1)
        base[hole].entry.heapIndex = hole
        hole = parent
      }
      slot.entry.heapIndex = hole
      (base + hole).initialize(to: slot)
    }
  }

  private mutating func siftDown(_ start: Int) {
    self.slots.withUnsafeMutableBufferPointer { heap in
      let count = heap.count
      guard let base = heap.baseAddress, 2 * start + 1 < count else { return }
      let slot = (base + start).move()
      var hole = start
      while true {
        let left = 2 * hole + 1
        guard left < count else { break }
        let right = left + 1
        let child = right < count && base[right].isBefore(base[left]) ? right : left
        guard base[child].isBefore(slot) else { break }
        (base + hole).moveInitialize(from: base + child, count: 1)
        base[hole].entry.heapIndex = hole
        hole = child
      }
      slot.entry.heapIndex = hole
      (base + hole).initialize(to: slot)
    }
  }
}

/// Waiters to resume once the lock is released: usually one, kept inline.
struct Resumptions<Waiter> {
  private(set) var first: Waiter?
  private(set) var others: [Waiter] = []

  init() {}

  var isEmpty: Bool { self.first == nil }
  var count: Int { self.first == nil ? 0 : 1 + self.others.count }

  mutating func append(_ waiter: Waiter) {
    if self.first == nil { self.first = waiter } else { self.others.append(waiter) }
  }

  mutating func append(contentsOf waiters: some Sequence<Waiter>) {
    for waiter in waiters { self.append(waiter) }
  }

  mutating func append(contentsOf other: Resumptions) {
    if let first = other.first { self.append(first) }
    // NB: checked: appending an empty array to the empty one still made a new buffer, on every
    // removal of a cancelled timer.
    if !other.others.isEmpty { self.others.append(contentsOf: other.others) }
  }

  /// Every waiter, first one first.
  var all: [Waiter] {
    (self.first.map { [$0] } ?? []) + self.others
  }
}

extension Resumptions: Sendable where Waiter: Sendable {}

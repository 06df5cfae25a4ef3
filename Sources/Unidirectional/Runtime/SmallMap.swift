/// A dictionary that keeps a single entry inline: no allocation while it holds at most one.
///
/// The state machine's maps (live units, lifetimes, cancellation identifiers) hold one entry for
/// most stores (a connection with its one timer), and a `Dictionary` with one entry is a 200-350 B
/// allocation. This one allocates only from the second entry on, and drops what it allocated when
/// the count falls back to one.
///
/// NB: mutations go through ``update(_:_:)`` (a non-escaping closure over the value in place), not
/// through `dict[key]?.field = ...`, whose `_modify` coroutine allocated its frame on the heap for
/// values this size.
struct SmallMap<Key: Hashable, Value> {
  enum Storage {
    case empty
    case one(Key, Value)
    case many([Key: Value])
  }

  private(set) var storage = Storage.empty

  init() {}

  /// Whether there is no entry.
  var isEmpty: Bool {
    if case .empty = self.storage { return true }
    return false
  }

  /// The number of entries.
  var count: Int {
    switch self.storage {
    case .empty: 0
    case .one: 1
    case .many(let entries): entries.count
    }
  }

  /// The value for `key`, if any (a copy).
  subscript(key: Key) -> Value? {
    switch self.storage {
    case .empty: return nil
    case .one(let existing, let value): return existing == key ? value : nil
    case .many(let entries): return entries[key]
    }
  }

  /// Whether `key` has an entry.
  func contains(_ key: Key) -> Bool {
    switch self.storage {
    case .empty: false
    case .one(let existing, _): existing == key
    case .many(let entries): entries.index(forKey: key) != nil
    }
  }

  /// Sets the value for `key`, replacing any.
  ///
  /// NB: `consuming`, so the value moves into the map instead of being copied and the caller's
  /// copy destroyed (a record copy went through runtime witnesses).
  mutating func insert(_ value: consuming Value, forKey key: consuming Key) {
    switch self.take() {
    case .empty:
      self.storage = .one(key, value)
    case .one(let existing, let old):
      if existing == key {
        self.storage = .one(key, value)
      } else {
        self.storage = .many([existing: old, key: value])
      }
    case .many(var entries):
      entries[key] = value
      self.storage = .many(entries)
    }
  }

  /// Changes the value for `key` in place; `nil` (and `body` is not called) when there is none.
  mutating func update<R>(_ key: Key, _ body: (inout Value) -> R) -> R? {
    switch self.take() {
    case .empty:
      return nil
    case .one(let existing, var value):
      defer { self.storage = .one(existing, value) }
      guard existing == key else { return nil }
      return body(&value)
    case .many(var entries):
      defer { self.storage = .many(entries) }
      guard let index = entries.index(forKey: key) else { return nil }
      return body(&entries.values[index])
    }
  }

  /// Removes the entry for `key`; returns its value.
  @discardableResult
  mutating func removeValue(forKey key: Key) -> Value? {
    switch self.take() {
    case .empty:
      return nil
    case .one(let existing, let value):
      guard existing == key else {
        self.storage = .one(existing, value)
        return nil
      }
      return value
    case .many(var entries):
      let removed = entries.removeValue(forKey: key)
      if entries.count == 1, let last = entries.first {
        self.storage = .one(last.key, last.value)
      } else if !entries.isEmpty {
        self.storage = .many(entries)
      }
      return removed
    }
  }

  /// Moves the storage out, leaving it empty: a `switch` over the moved value binds its payload
  /// without copying it (switching over `self.storage` copied the record out, retaining what it
  /// holds, then released the original, on every removal).
  private mutating func take() -> Storage {
    var taken = Storage.empty
    swap(&taken, &self.storage)
    return taken
  }

  /// Removes every entry.
  mutating func removeAll() {
    self.storage = .empty
  }

  /// The keys, in no particular order.
  var keys: [Key] {
    switch self.storage {
    case .empty: []
    case .one(let key, _): [key]
    case .many(let entries): Array(entries.keys)
    }
  }

  /// The values, in no particular order.
  var values: [Value] {
    switch self.storage {
    case .empty: []
    case .one(_, let value): [value]
    case .many(let entries): Array(entries.values)
    }
  }

  /// The entries, in no particular order.
  var entries: [(key: Key, value: Value)] {
    switch self.storage {
    case .empty: []
    case .one(let key, let value): [(key, value)]
    case .many(let entries): entries.map { ($0.key, $0.value) }
    }
  }
}

extension SmallMap: Sendable where Key: Sendable, Value: Sendable {}
extension SmallMap.Storage: Sendable where Key: Sendable, Value: Sendable {}

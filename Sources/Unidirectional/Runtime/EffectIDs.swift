/// A set of unit identities that allocates nothing while it holds one or two (and drops what it
/// allocated when it is back to two).
enum EffectIDs: Sequence, Sendable {
  case none
  case one(EffectID)
  /// Two, in the order they came: a session's lifetime holds its re-armed timer and the request's
  /// `.run` until that ends, and an array here was allocated and freed on every request.
  case two(EffectID, EffectID)
  case many(Set<EffectID>)

  var count: Int {
    switch self {
    case .none: 0
    case .one: 1
    case .two: 2
    case .many(let ids): ids.count
    }
  }

  /// The identity when there is exactly one.
  var only: EffectID? {
    guard case .one(let id) = self else { return nil }
    return id
  }

  mutating func insert(_ id: EffectID) {
    switch self {
    case .none:
      self = .one(id)
    case .one(let existing):
      if existing != id { self = .two(existing, id) }
    case .two(let first, let second):
      if first != id && second != id { self = .many([first, second, id]) }
    case .many(var ids):
      self = .none
      ids.insert(id)
      self = .many(ids)
    }
  }

  /// Removes `id`; returns whether the set is now empty.
  mutating func remove(_ id: EffectID) -> Bool {
    switch self {
    case .none:
      return true
    case .one(let existing):
      if existing == id { self = .none }
      return existing == id
    case .two(let first, let second):
      if first == id {
        self = .one(second)
      } else if second == id {
        self = .one(first)
      }
      return false
    case .many(var ids):
      self = .none
      ids.remove(id)
      // NB: back inline at two: a set kept past that was part of every idle session.
      if ids.count > 2 {
        self = .many(ids)
      } else {
        var remaining = ids.makeIterator()
        if let first = remaining.next() {
          self = remaining.next().map { .two(first, $0) } ?? .one(first)
        }
      }
      return ids.isEmpty
    }
  }

  func makeIterator() -> Iterator {
    switch self {
    case .none: Iterator(state: .done)
    case .one(let id): Iterator(state: .one(id))
    case .two(let first, let second): Iterator(state: .two(first, second))
    case .many(let ids): Iterator(state: .many(ids.makeIterator()))
    }
  }

  /// Iterates without allocating (an `AnyIterator` would box its state: three allocations per
  /// re-armed timer).
  struct Iterator: IteratorProtocol {
    enum State {
      case done
      case one(EffectID)
      case two(EffectID, EffectID)
      case many(Set<EffectID>.Iterator)
    }

    var state: State

    mutating func next() -> EffectID? {
      switch self.state {
      case .done:
        return nil
      case .one(let id):
        self.state = .done
        return id
      case .two(let first, let second):
        self.state = .one(second)
        return first
      case .many(var iterator):
        self.state = .done
        guard let id = iterator.next() else { return nil }
        self.state = .many(iterator)
        return id
      }
    }
  }
}

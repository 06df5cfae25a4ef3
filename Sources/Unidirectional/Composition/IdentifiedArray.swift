/// An ordered collection of identifiable elements with unique ids and O(1) lookup by id.
///
/// ```swift
/// var todos: IdentifiedArrayOf<Todo> = [Todo(id: 1, title: "Milk")]
/// todos[id: 1]?.isDone = true      // update in place by id
/// todos[id: 2] = Todo(id: 2, title: "Eggs")   // appends
/// todos[id: 1] = nil               // removes
/// ```
///
/// Elements keep their insertion order (change it with `move`, `sort`, `insert(_:at:)`).
/// Inserting an element whose id is already present replaces nothing: `append` returns
/// `false` and the collection is unchanged.
public struct IdentifiedArray<ID: Hashable, Element: Identifiable>: RandomAccessCollection
where Element.ID == ID {
  /// The ids, in order.
  public private(set) var ids: [ID]
  private var storage: [ID: Element]

  /// An empty collection.
  public init() {
    self.ids = []
    self.storage = [:]
  }

  /// Creates a collection from elements with unique ids; a later duplicate is dropped.
  public init(uniqueElements elements: some Sequence<Element>) {
    self.init()
    for element in elements { self.append(element) }
  }

  /// The elements, in order.
  public var elements: [Element] {
    self.ids.map { self.element(withKnownID: $0) }
  }

  // MARK: Collection

  /// The position of the first element (`0`).
  public var startIndex: Int { 0 }
  /// The position one past the last element (the count).
  public var endIndex: Int { self.ids.count }

  /// The element at `position`, in insertion order.
  public subscript(position: Int) -> Element {
    self.element(withKnownID: self.ids[position])
  }

  /// The element stored under an id taken from `ids`.
  ///
  /// NB: every id in `ids` has an element in `storage`: each mutation below keeps both in step.
  private func element(withKnownID id: ID) -> Element {
    guard let element = self.storage[id] else {
      preconditionFailure("IdentifiedArray: id \(id) is listed but has no element")
    }
    return element
  }

  // MARK: By id

  /// The element with `id`; setting `nil` removes it, setting a new one appends it.
  public subscript(id id: ID) -> Element? {
    get { self.storage[id] }
    set {
      guard let newValue else {
        self.remove(id: id)
        return
      }
      if self.storage.updateValue(newValue, forKey: id) == nil {
        self.ids.append(id)
      }
    }
  }

  /// Whether an element has this id.
  public func contains(id: ID) -> Bool {
    self.storage[id] != nil
  }

  /// The position of the element with `id` (O(n)).
  public func index(id: ID) -> Int? {
    guard self.storage[id] != nil else { return nil }
    return self.ids.firstIndex(of: id)
  }

  // MARK: Mutating

  /// Appends `element` unless its id is present.
  ///
  /// - Returns: Whether it was inserted, and its position.
  @discardableResult
  public mutating func append(_ element: Element) -> (inserted: Bool, index: Int) {
    if self.storage[element.id] != nil, let existing = self.index(id: element.id) {
      return (false, existing)
    }
    self.storage[element.id] = element
    self.ids.append(element.id)
    return (true, self.ids.count - 1)
  }

  /// Appends each element whose id is not present.
  public mutating func append(contentsOf elements: some Sequence<Element>) {
    for element in elements { self.append(element) }
  }

  /// Inserts `element` at `index` unless its id is present.
  @discardableResult
  public mutating func insert(_ element: Element, at index: Int) -> (inserted: Bool, index: Int) {
    if self.storage[element.id] != nil, let existing = self.index(id: element.id) {
      return (false, existing)
    }
    self.storage[element.id] = element
    self.ids.insert(element.id, at: index)
    return (true, index)
  }

  /// Replaces the element with the same id, or appends it.
  ///
  /// - Returns: The element it replaced.
  @discardableResult
  public mutating func updateOrAppend(_ element: Element) -> Element? {
    let old = self.storage.updateValue(element, forKey: element.id)
    if old == nil { self.ids.append(element.id) }
    return old
  }

  /// Removes the element with `id`.
  @discardableResult
  public mutating func remove(id: ID) -> Element? {
    guard let element = self.storage.removeValue(forKey: id) else { return nil }
    self.ids.removeAll { $0 == id }
    return element
  }

  /// Removes the element at `index`.
  @discardableResult
  public mutating func remove(at index: Int) -> Element {
    let id = self.ids.remove(at: index)
    let element = self.element(withKnownID: id)
    self.storage[id] = nil
    return element
  }

  /// Removes the elements at the given positions.
  public mutating func remove(atOffsets offsets: some Sequence<Int>) {
    for index in Set(offsets).sorted(by: >) { self.remove(at: index) }
  }

  /// Removes the elements matching `shouldBeRemoved`.
  public mutating func removeAll(where shouldBeRemoved: (Element) throws -> Bool) rethrows {
    for id in self.ids where try shouldBeRemoved(self.element(withKnownID: id)) {
      self.remove(id: id)
    }
  }

  /// Removes every element.
  public mutating func removeAll() {
    self.ids.removeAll()
    self.storage.removeAll()
  }

  /// Moves the elements at `source` to before `destination`, like SwiftUI's `onMove`.
  public mutating func move(fromOffsets source: some Sequence<Int>, toOffset destination: Int) {
    let moving = Set(source)
    let moved = moving.sorted().map { self.ids[$0] }
    var result: [ID] = []
    result.reserveCapacity(self.ids.count)
    for (index, id) in self.ids.enumerated() {
      if index == destination { result.append(contentsOf: moved) }
      if !moving.contains(index) { result.append(id) }
    }
    if destination >= self.ids.count { result.append(contentsOf: moved) }
    self.ids = result
  }

  /// Sorts the elements in place.
  public mutating func sort(by areInIncreasingOrder: (Element, Element) throws -> Bool) rethrows {
    let storage = self.storage
    try self.ids.sort { lhs, rhs in
      guard let lhs = storage[lhs], let rhs = storage[rhs] else { return false }
      return try areInIncreasingOrder(lhs, rhs)
    }
  }

  /// Updates each element in place (ids must not change; an element whose id changes is kept
  /// under its old id).
  public mutating func updateEach(_ update: (inout Element) throws -> Void) rethrows {
    for id in self.ids {
      guard let position = self.storage.index(forKey: id) else { continue }
      try update(&self.storage.values[position])
    }
  }
}

/// An ``IdentifiedArray`` keyed by its elements' own ids.
public typealias IdentifiedArrayOf<Element: Identifiable> = IdentifiedArray<Element.ID, Element>

extension IdentifiedArray where Element: Comparable {
  /// Sorts the elements in increasing order.
  public mutating func sort() {
    self.sort(by: <)
  }
}

extension IdentifiedArray: ExpressibleByArrayLiteral {
  /// Creates a collection from a literal; a later element with a duplicate id is dropped.
  public init(arrayLiteral elements: Element...) {
    self.init(uniqueElements: elements)
  }
}

extension IdentifiedArray: Equatable where Element: Equatable {
  /// Whether both hold equal elements in the same order.
  public static func == (lhs: Self, rhs: Self) -> Bool {
    lhs.ids == rhs.ids && lhs.storage == rhs.storage
  }
}

extension IdentifiedArray: Hashable where Element: Hashable {
  /// Hashes the elements in order.
  public func hash(into hasher: inout Hasher) {
    hasher.combine(self.count)
    for element in self { hasher.combine(element) }
  }
}

extension IdentifiedArray: Sendable where ID: Sendable, Element: Sendable {}

extension IdentifiedArray: Encodable where Element: Encodable {
  /// Encodes the elements as an array, in order.
  public func encode(to encoder: any Encoder) throws {
    var container = encoder.unkeyedContainer()
    for element in self { try container.encode(element) }
  }
}

extension IdentifiedArray: Decodable where Element: Decodable {
  /// Decodes an array of elements; a duplicate id is a decoding error.
  public init(from decoder: any Decoder) throws {
    self.init()
    var container = try decoder.unkeyedContainer()
    while !container.isAtEnd {
      let element = try container.decode(Element.self)
      guard self.append(element).inserted else {
        throw DecodingError.dataCorruptedError(
          in: container,
          debugDescription: "Duplicate element id: \(element.id)"
        )
      }
    }
  }
}

extension IdentifiedArray: CustomReflectable {
  /// A collection mirror of the elements, so dumps and diffs show them like an array.
  public var customMirror: Mirror {
    Mirror(self, unlabeledChildren: self.elements, displayStyle: .collection)
  }
}

extension IdentifiedArray: CustomStringConvertible {
  /// The elements, printed like an array.
  public var description: String {
    self.elements.description
  }
}

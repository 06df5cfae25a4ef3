/// A value kept behind one pointer, allocated on its first write: room for what few stores use,
/// out of every store's own size.
///
/// Reading an unallocated one reads `Value()`. Writing copies the value first when another
/// `OutOfLine` shares it (copy on write), so it has value semantics like the fields it replaces.
///
/// ```swift
/// var rare = OutOfLine<RareFields>()   // 8 bytes, no allocation
/// rare.value.waiters[ticket] = waiter  // allocates the box once
/// ```
struct OutOfLine<Value: EmptyInitializable> {
  private final class Box {
    var value: Value

    init(_ value: Value) {
      self.value = value
    }

    /// The value, borrowed in place.
    ///
    /// NB: reading ``value`` itself copied the whole value out (every map it holds retained and
    /// released) before a reader looked at one field, on every re-armed timer's check for a
    /// debounce.
    var borrowed: Value {
      _read { yield self.value }
    }
  }

  private var box: Box?

  init() {}

  /// Whether a write has allocated the box.
  var isAllocated: Bool {
    self.box != nil
  }

  /// `body`'s reading of the value, or `unallocated` before the first write.
  ///
  /// NB: the way to read on hot paths: reading ``value`` before the first write builds a whole
  /// `Value()` (for the effect state machine, five empty dictionaries made and destroyed on every
  /// cancellation).
  @inline(__always)
  func read<T>(_ body: (Value) -> T, unallocated: @autoclosure () -> T) -> T {
    guard let box = self.box else { return unallocated() }
    return body(box.borrowed)
  }

  /// The value; `Value()` until the first write.
  var value: Value {
    get { self.box?.value ?? Value() }
    _modify {
      if !isKnownUniquelyReferenced(&self.box) {
        self.box = Box(self.box?.value ?? Value())
      }
      // NB: the lines above leave a box.
      yield &self.box.unsafelyUnwrapped.value
    }
  }
}

// Safety: the box is written only through `value`'s `_modify`, after
// `isKnownUniquelyReferenced` proved this is its only holder; a box two values share is only
// read. What it holds is `Sendable`. That is the argument that makes `Array` `Sendable`.
extension OutOfLine: @unchecked Sendable where Value: Sendable {}

/// A value with an empty state to start from (``OutOfLine``'s before its first write).
protocol EmptyInitializable {
  init()
}

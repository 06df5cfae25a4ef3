import Synchronization

/// Embeds a child action into the parent action a `WritableKeyPath<Parent, Child?>` reads,
/// without a parent action to write into.
///
/// A key path's setter needs a parent value: `parent[keyPath: \.child] = action`. A scoped
/// store's first `send` has none, and a setter written in the seeds' style
/// (`guard case .child = self, let newValue else { return }`) only works on a parent already
/// in that case. So for an enum parent this builds the case directly, the way the compiler
/// builds `.child(action)`: it initializes the payload and injects the case's tag with the
/// enum's value witness.
///
/// The case is found once, from the enum's reflection metadata: the cases whose payload type is
/// exactly `Child` (or `(label: Child)`). Each candidate is built with the first child action
/// and kept only if the key path's getter reads it back (so a user's property that reads another
/// case, or two cases with the same payload type, resolve to the case the getter reads). When
/// nothing matches (the parent is not an enum, the payload is a tuple of several values or an
/// `indirect` case), `embed` falls back to writing into a template action and checks the getter
/// reads it back.
@usableFromInline
final class KeyPathEmbedder<Parent: Sendable, Child: Sendable>: Sendable {
  @usableFromInline let path: SendableKeyPath<Parent, Child?>
  /// The tags of the cases whose payload type is exactly `Child`.
  private let candidates: [UInt32]
  /// The tag the getter reads back: `unknown`, `noCase`, or a tag.
  private let resolvedTag = Atomic<Int>(KeyPathEmbedder.unknown)

  private static var unknown: Int { -1 }
  private static var noCase: Int { -2 }

  /// The resolved tag, or a negative number before (or without) one.
  @usableFromInline var tag: Int {
    self.resolvedTag.load(ordering: .relaxed)
  }

  @usableFromInline
  init(_ path: WritableKeyPath<Parent, Child?>) {
    self.path = SendableKeyPath(path)
    self.candidates = EnumLayout.payloadTags(of: Child.self, in: Parent.self)
    if self.candidates.isEmpty {
      self.resolvedTag.store(Self.noCase, ordering: .relaxed)
    }
  }

  /// `child` embedded in the parent case the key path reads, or `nil` when neither the case
  /// nor `template` can carry it.
  ///
  /// NB: inlinable, so building the case is specialized for the feature's types in its module.
  @inlinable
  func embed(_ child: Child, template: () -> Parent?) -> Parent? {
    let tag = self.tag
    if tag >= 0 {
      return EnumLayout.make(Parent.self, tag: UInt32(tag), payload: child)
    }
    return self.resolveAndEmbed(child, template: template)
  }

  @usableFromInline
  func resolveAndEmbed(_ child: Child, template: () -> Parent?) -> Parent? {
    if self.resolvedTag.load(ordering: .relaxed) == Self.unknown {
      for candidate in self.candidates {
        let parent = EnumLayout.make(Parent.self, tag: candidate, payload: child)
        if parent[keyPath: self.path.value] != nil {
          // NB: racing first sends (on different stores sharing this scope) store the same tag.
          self.resolvedTag.store(Int(candidate), ordering: .relaxed)
          return parent
        }
      }
      self.resolvedTag.store(Self.noCase, ordering: .relaxed)
    }
    guard var parent = template() else { return nil }
    parent[keyPath: self.path.value] = child
    // NB: a setter that only writes into its own case leaves another case untouched: sending
    // the unchanged template would send the wrong action.
    return parent[keyPath: self.path.value] == nil ? nil : parent
  }
}

/// What the Swift runtime's metadata says about an enum's cases, read to build a case value.
///
/// Layouts read (64-bit, Swift 5 ABI; the same on Linux and Darwin):
/// - enum metadata: `kind` (0x201) at 0, the nominal type descriptor at 8, generic arguments
///   from 16;
/// - the enum descriptor: flags at 0 (kind 18, generic bit 0x80), the field descriptor
///   (relative) at 16, the number of payload cases (low 24 bits) at 20 and of empty cases at 24;
/// - the field descriptor: the record size at 10, the record count at 12, records from 16,
///   each with flags (bit 0: indirect), a relative mangled type name (0 for an empty case) and
///   a relative name;
/// - tuple metadata: kind 0x301, the element count at 8, the element types from 24;
/// - the value witness table (at metadata − 8): the size at 64, flags at 80 (0x200000: has enum
///   witnesses) and `destructiveInjectEnumTag(value, tag, metadata)` at 104.
///
/// Cases take tags in field-record order: those with payload storage (`0..<payloadCaseCount`),
/// then those without (no payload, or a zero-sized one).
/// Anything unexpected (another kind, counts that disagree, a 32-bit platform) yields `nil`,
/// and the caller falls back to a template: a misread never builds a value.
@usableFromInline
struct EnumLayout {
  private let metadata: UnsafeRawPointer
  private let descriptor: UnsafeRawPointer
  private let fields: UnsafeRawPointer
  private let payloadCaseCount: Int
  private let emptyCaseCount: Int
  private let isGeneric: Bool

  init?(of type: Any.Type) {
    guard MemoryLayout<Int>.size == 8 else { return nil }
    let metadata = unsafeBitCast(type, to: UnsafeRawPointer.self)
    guard metadata.load(as: Int.self) == 0x201 else { return nil }
    let descriptor = metadata.load(fromByteOffset: 8, as: UnsafeRawPointer.self)
    let flags = descriptor.load(as: UInt32.self)
    guard flags & 0x1F == 18 else { return nil }
    let fieldsOffset = descriptor.load(fromByteOffset: 16, as: Int32.self)
    guard fieldsOffset != 0 else { return nil }
    let valueWitnesses = metadata.load(fromByteOffset: -8, as: UnsafeRawPointer.self)
    guard valueWitnesses.load(fromByteOffset: 80, as: UInt32.self) & 0x0020_0000 != 0 else {
      return nil
    }
    self.metadata = metadata
    self.descriptor = descriptor
    self.fields = descriptor + 16 + Int(fieldsOffset)
    self.payloadCaseCount = Int(descriptor.load(fromByteOffset: 20, as: UInt32.self) & 0xFF_FFFF)
    self.emptyCaseCount = Int(descriptor.load(fromByteOffset: 24, as: UInt32.self))
    self.isGeneric = flags & 0x80 != 0
  }

  /// `payloadTags(of:)` of `type`'s layout, remembered per pair of types: reading the metadata
  /// resolves mangled names (~1 µs), and stores are scoped far more often than types appear.
  static func payloadTags(of payload: Any.Type, in type: Any.Type) -> [UInt32] {
    let key = [ObjectIdentifier(type), ObjectIdentifier(payload)]
    if let tags = Self.cache.withValue({ $0[key] }) {
      return tags
    }
    let tags = EnumLayout(of: type)?.payloadTags(of: payload) ?? []
    Self.cache.withValue { $0[key] = tags }
    return tags
  }

  private static let cache = LockIsolated<[[ObjectIdentifier]: [UInt32]]>([:])

  /// The tags of the direct (not `indirect`) cases whose payload type is `payload` (or a
  /// labelled single payload of that type).
  ///
  /// The field records are in tag order: the cases with a payload that takes storage first,
  /// then the others, which include cases whose payload is zero-sized (`case child(Child.Action)`
  /// with a one-case `Child.Action`): those are built by injecting the tag alone.
  func payloadTags(of payload: Any.Type) -> [UInt32] {
    let recordSize = Int(self.fields.load(fromByteOffset: 10, as: UInt16.self))
    let recordCount = Int(self.fields.load(fromByteOffset: 12, as: UInt32.self))
    guard recordSize >= 12, recordCount == self.payloadCaseCount + self.emptyCaseCount else {
      return []
    }
    var tags: [UInt32] = []
    for index in 0..<recordCount {
      let record = self.fields + 16 + index * recordSize
      let typeNameOffset = record.load(fromByteOffset: 4, as: Int32.self)
      guard typeNameOffset != 0 else { continue }  // no payload
      let isIndirect = record.load(as: UInt32.self) & 0x1 != 0
      guard !isIndirect else { continue }
      let name = (record + 4 + Int(typeNameOffset)).assumingMemoryBound(to: UInt8.self)
      let type = _getTypeByMangledNameInContext(
        name,
        UInt(Self.mangledNameLength(name)),
        genericContext: self.descriptor,
        genericArguments: self.isGeneric ? self.metadata + 16 : nil
      )
      guard let type, type == payload || Self.isSingleElementTuple(type, of: payload) else {
        continue
      }
      // NB: a case laid out without payload storage must have a zero-sized payload.
      if index >= self.payloadCaseCount && Self.size(of: type) != 0 {
        continue
      }
      tags.append(UInt32(index))
    }
    return tags
  }

  /// The size of `type`'s values, from its value witness table (at 64).
  private static func size(of type: Any.Type) -> Int {
    let metadata = unsafeBitCast(type, to: UnsafeRawPointer.self)
    return metadata.load(fromByteOffset: -8, as: UnsafeRawPointer.self)
      .load(fromByteOffset: 64, as: Int.self)
  }

  /// Whether `type` is `(label: element)`: a labelled single payload, `case child(action: A)`,
  /// laid out exactly as its element. Tuple metadata: kind 0x301 at 0, the element count at 8,
  /// the elements (type, offset) from 24.
  private static func isSingleElementTuple(_ type: Any.Type, of element: Any.Type) -> Bool {
    let metadata = unsafeBitCast(type, to: UnsafeRawPointer.self)
    guard metadata.load(as: Int.self) == 0x301, metadata.load(fromByteOffset: 8, as: Int.self) == 1
    else { return false }
    return metadata.load(fromByteOffset: 24, as: UnsafeRawPointer.self)
      == unsafeBitCast(element, to: UnsafeRawPointer.self)
  }

  /// The length of a mangled name that may embed symbolic references (a control byte followed
  /// by a 4-byte relative or a pointer-sized absolute reference, which may contain zeros).
  private static func mangledNameLength(_ start: UnsafePointer<UInt8>) -> Int {
    var cursor = start
    while true {
      switch cursor.pointee {
      case 0: return cursor - start
      case 0x01...0x17: cursor += 1 + 4
      case 0x18...0x1F: cursor += 1 + MemoryLayout<Int>.size
      default: cursor += 1
      }
    }
  }

  @usableFromInline typealias InjectTag = @convention(c) (UnsafeMutableRawPointer, UInt32, UnsafeRawPointer) -> Void

  /// `Enum` in the payload case `tag`, carrying `payload`.
  ///
  /// Safety: `tag` comes from `payloadTags(of: Payload.self)`: its payload type is exactly
  /// `Payload`, stored at offset 0 of the enum (or zero-sized, when the case has no payload
  /// storage), so this initializes the payload and injects the tag exactly as the compiler
  /// builds the case. The witness is a Swift-convention function of
  /// (pointer, UInt32, pointer), passed in the same registers as the C convention on x86_64 and
  /// arm64 (it uses neither the self nor the error register).
  @inlinable
  static func make<Enum, Payload>(_: Enum.Type, tag: UInt32, payload: Payload) -> Enum {
    let metadata = unsafeBitCast(Enum.self as Any.Type, to: UnsafeRawPointer.self)
    let valueWitnesses = metadata.load(fromByteOffset: -8, as: UnsafeRawPointer.self)
    let inject = unsafeBitCast(
      valueWitnesses.load(fromByteOffset: 104, as: UnsafeRawPointer.self),
      to: InjectTag.self
    )
    return withUnsafeTemporaryAllocation(of: Enum.self, capacity: 1) { buffer in
      let value = UnsafeMutableRawPointer(buffer.baseAddress!)
      value.initializeMemory(as: Payload.self, repeating: payload, count: 1)
      inject(value, tag, metadata)
      return buffer.baseAddress!.move()
    }
  }
}

import FoundationEssentials

/// A pretty, deterministic, multi-line description of a value, for diffs in test failures and
/// `_printChanges()`.
///
/// Structs print as `Type(field: value, …)` one field per line, enums as `.case(payload)`,
/// arrays with their indices, dictionaries sorted by key and sets sorted by element, so two
/// dumps of equal values are equal strings and a diff of two dumps shows what changed.
package func customDump(_ value: Any) -> String {
  var dumper = Dumper()
  return dumper.dump(value, indent: 0)
}

private struct Dumper {
  /// Objects on the current path, to print cycles once.
  var visiting: Set<ObjectIdentifier> = []

  mutating func dump(_ value: Any, indent: Int) -> String {
    let mirror = Mirror(reflecting: value)
    // NB: optionals first: a dynamic cast sees through them (`Optional(3) is any BinaryInteger`),
    // and the scalar case would print "Optional(3)".
    if mirror.displayStyle == .optional {
      guard let wrapped = mirror.children.first?.value else { return "nil" }
      return self.dump(wrapped, indent: indent)
    }
    switch value {
    case let string as String:
      return Self.quote(string)
    case let character as Character:
      return Self.quote(String(character))
    case is Bool, is any BinaryInteger, is any BinaryFloatingPoint, is Duration, is UUID, is Date:
      return "\(value)"
    default:
      break
    }
    switch mirror.displayStyle {
    case .enum:
      let description = "\(value)"
      let caseName = description.prefix { $0 != "(" }
      guard let payload = mirror.children.first else { return "." + caseName }
      let name = payload.label ?? String(caseName)
      let payloadMirror = Mirror(reflecting: payload.value)
      if payloadMirror.displayStyle == .tuple {
        let fields = payloadMirror.children.map { (label: $0.label, value: $0.value) }
        return "." + name + self.fields(fields, open: "(", close: ")", indent: indent, tuple: true)
      }
      let inner = self.dump(payload.value, indent: indent)
      return ".\(name)(\(inner))"

    case .struct, .class:
      var name = Self.typeName(of: value)
      if mirror.displayStyle == .class {
        let object = ObjectIdentifier(value as AnyObject)
        if self.visiting.contains(object) { return name + "(↩︎)" }
        self.visiting.insert(object)
      }
      defer {
        if mirror.displayStyle == .class {
          self.visiting.remove(ObjectIdentifier(value as AnyObject))
        }
      }
      if mirror.children.isEmpty, let custom = value as? any CustomStringConvertible {
        name = custom.description
        return name
      }
      let fields = mirror.children.map { (label: $0.label, value: $0.value) }
      return name + self.fields(fields, open: "(", close: ")", indent: indent, tuple: false)

    case .tuple:
      let fields = mirror.children.map { (label: Self.tupleLabel($0.label), value: $0.value) }
      return self.fields(fields, open: "(", close: ")", indent: indent, tuple: true)

    case .collection:
      let elements = mirror.children.enumerated().map {
        (label: Optional("[\($0.offset)]"), value: $0.element.value)
      }
      if elements.isEmpty { return "[]" }
      return self.fields(elements, open: "[", close: "]", indent: indent, tuple: false)

    case .dictionary:
      var pairs: [(key: String, value: String)] = []
      for child in mirror.children {
        let pair = Array(Mirror(reflecting: child.value).children)
        guard pair.count == 2 else { continue }
        pairs.append(
          (
            self.dump(pair[0].value, indent: indent + 1),
            self.dump(pair[1].value, indent: indent + 1)
          )
        )
      }
      if pairs.isEmpty { return "[:]" }
      pairs.sort { $0.key < $1.key }
      let pad = String(repeating: "  ", count: indent + 1)
      let lines = pairs.map { pad + $0.key + ": " + $0.value }
      return "[\n" + lines.joined(separator: ",\n") + "\n" + String(repeating: "  ", count: indent)
        + "]"

    case .set:
      var elements = mirror.children.map { self.dump($0.value, indent: indent + 1) }
      if elements.isEmpty { return "Set([])" }
      elements.sort()
      let pad = String(repeating: "  ", count: indent + 1)
      return "Set([\n" + elements.map { pad + $0 }.joined(separator: ",\n") + "\n"
        + String(repeating: "  ", count: indent) + "])"

    default:
      return "\(value)"
    }
  }

  private mutating func fields(
    _ fields: [(label: String?, value: Any)],
    open: String,
    close: String,
    indent: Int,
    tuple: Bool
  ) -> String {
    if fields.isEmpty { return open + close }
    let rendered = fields.map { field -> String in
      let value = self.dump(field.value, indent: indent + 1)
      guard let label = field.label else { return value }
      return label + ": " + value
    }
    // Short payloads of enums and tuples stay on one line.
    let oneLine = rendered.joined(separator: ", ")
    if tuple, !oneLine.contains("\n"), oneLine.count <= 60 {
      return open + oneLine + close
    }
    let pad = String(repeating: "  ", count: indent + 1)
    return open + "\n" + rendered.map { pad + $0 }.joined(separator: ",\n") + "\n"
      + String(repeating: "  ", count: indent) + close
  }

  private static func typeName(of value: Any) -> String {
    var qualified = _typeName(type(of: value), qualified: true)
    // Private and local types carry an "(unknown context at $…)." component; drop it.
    while let start = qualified.firstRange(of: "(unknown context at "),
      let end = qualified[start.upperBound...].firstRange(of: ").")
    {
      qualified.removeSubrange(start.lowerBound..<end.upperBound)
    }
    // Drop the module name, keep the nesting: `Counter.State`, not `App.Counter.State`.
    guard let dot = qualified.firstIndex(of: ".") else { return qualified }
    return String(qualified[qualified.index(after: dot)...])
  }

  private static func tupleLabel(_ label: String?) -> String? {
    guard let label, !label.hasPrefix(".") else { return nil }
    return label
  }

  private static func quote(_ string: String) -> String {
    var result = "\""
    for character in string {
      switch character {
      case "\"": result += "\\\""
      case "\\": result += "\\\\"
      case "\n": result += "\\n"
      case "\t": result += "\\t"
      default: result.append(character)
      }
    }
    return result + "\""
  }
}

/// A line diff of two dumps: `-` lines only in `expected`, `+` lines only in `actual`, two
/// lines of unchanged context around each change and longer unchanged runs collapsed.
///
/// Returns `nil` when the dumps are equal.
package func diffDumps(_ expected: String, _ actual: String) -> String? {
  guard expected != actual else { return nil }
  let old = expected.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
  let new = actual.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
  let edits = lineEdits(old, new)
  let context = 2
  var lines: [String] = []
  var index = 0
  while index < edits.count {
    guard case .same = edits[index] else {
      switch edits[index] {
      case .removed(let line): lines.append("- " + line)
      case .added(let line): lines.append("+ " + line)
      case .same: break
      }
      index += 1
      continue
    }
    // A run of unchanged lines: keep context next to changes, collapse the middle.
    var end = index
    while end < edits.count, case .same = edits[end] { end += 1 }
    let run = end - index
    // The first and last lines (the root's type and its closing bracket) always show.
    let keepBefore = index == 0 ? 1 : context
    let keepAfter = end == edits.count ? 1 : context
    if run > keepBefore + keepAfter + 1 {
      for offset in 0..<keepBefore { lines.append("  " + edits[index + offset].text) }
      lines.append("  … (\(run - keepBefore - keepAfter) unchanged)")
      for offset in (run - keepAfter)..<run { lines.append("  " + edits[index + offset].text) }
    } else {
      for offset in 0..<run { lines.append("  " + edits[index + offset].text) }
    }
    index = end
  }
  return lines.joined(separator: "\n")
}

private enum LineEdit {
  case same(String)
  case removed(String)
  case added(String)

  var text: String {
    switch self {
    case .same(let text), .removed(let text), .added(let text): return text
    }
  }
}

/// The shortest edit script between two line arrays (longest common subsequence).
private func lineEdits(_ old: [String], _ new: [String]) -> [LineEdit] {
  // NB: quadratic; dumps of test states are small. Very large ones fall back to replace-all.
  guard old.count * new.count <= 4_000_000 else {
    return old.map(LineEdit.removed) + new.map(LineEdit.added)
  }
  let rows = old.count + 1
  let columns = new.count + 1
  var lengths = [Int](repeating: 0, count: rows * columns)
  for i in stride(from: old.count - 1, through: 0, by: -1) {
    for j in stride(from: new.count - 1, through: 0, by: -1) {
      lengths[i * columns + j] =
        old[i] == new[j]
        ? lengths[(i + 1) * columns + j + 1] + 1
        : max(lengths[(i + 1) * columns + j], lengths[i * columns + j + 1])
    }
  }
  var edits: [LineEdit] = []
  var i = 0
  var j = 0
  while i < old.count || j < new.count {
    if i < old.count, j < new.count, old[i] == new[j] {
      edits.append(.same(old[i]))
      i += 1
      j += 1
    } else if j < new.count,
      i == old.count || lengths[i * columns + j + 1] >= lengths[(i + 1) * columns + j]
    {
      if i < old.count, lengths[i * columns + j + 1] == lengths[(i + 1) * columns + j] {
        // Prefer removals first so `-` lines precede their `+` replacements.
        edits.append(.removed(old[i]))
        i += 1
      } else {
        edits.append(.added(new[j]))
        j += 1
      }
    } else {
      edits.append(.removed(old[i]))
      i += 1
    }
  }
  return edits
}

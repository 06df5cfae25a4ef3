import Testing

@testable import Unidirectional

/// The state machine's inline-first map: every transition between no entry, one inline entry and
/// a dictionary.
@Suite struct SmallMapTests {
  @Test func oneEntryStaysInlineAndASecondSpillsIntoADictionary() {
    var map = SmallMap<String, Int>()
    #expect(map.isEmpty && map.count == 0 && map["a"] == nil)
    map.insert(1, forKey: "a")
    #expect(!map.isEmpty && map.count == 1 && map["a"] == 1 && map.contains("a"))
    map.insert(2, forKey: "a")  // replaces, still one
    #expect(map.count == 1 && map["a"] == 2)
    map.insert(3, forKey: "b")
    #expect(map.count == 2 && map["a"] == 2 && map["b"] == 3)
    map.insert(4, forKey: "c")
    #expect(Set(map.keys) == ["a", "b", "c"])
    #expect(map.values.sorted() == [2, 3, 4])
    #expect(map.entries.map(\.key).sorted() == ["a", "b", "c"])
  }

  @Test func updatingChangesTheValueInPlaceAndMissesUnknownKeys() {
    var map = SmallMap<String, [Int]>()
    #expect(map.update("a", { $0.append(1) }) == nil)
    map.insert([1], forKey: "a")
    #expect(
      map.update(
        "a",
        { value -> Int in
          value.append(2)
          return value.count
        }
      ) == 2
    )
    #expect(map.update("b", { $0.append(9) }) == nil)
    map.insert([7], forKey: "b")
    _ = map.update("b") { $0.append(8) }
    #expect(map["a"] == [1, 2] && map["b"] == [7, 8])
  }

  @Test func removingFallsBackToInlineThenToEmpty() {
    var map = SmallMap<String, Int>()
    #expect(map.removeValue(forKey: "a") == nil)
    map.insert(1, forKey: "a")
    #expect(map.removeValue(forKey: "b") == nil)
    map.insert(2, forKey: "b")
    map.insert(3, forKey: "c")
    #expect(map.removeValue(forKey: "missing") == nil && map.count == 3)
    #expect(map.removeValue(forKey: "a") == 1)
    #expect(map.removeValue(forKey: "b") == 2)
    #expect(map.count == 1 && map["c"] == 3)
    _ = map.update("c") { $0 += 1 }
    #expect(map["c"] == 4)
    #expect(map.removeValue(forKey: "c") == 4)
    #expect(map.isEmpty && map.keys.isEmpty && map.values.isEmpty && map.entries.isEmpty)
    map.insert(5, forKey: "d")
    map.insert(6, forKey: "e")
    map.removeAll()
    #expect(map.isEmpty)
  }

  @Test func aMissLeavesEveryShapeAsItWasAndARemovedValueIsReleased() {
    final class Payload: Sendable {}
    var map = SmallMap<String, Payload>()
    weak var first: Payload?
    do {
      let payload = Payload()
      first = payload
      map.insert(payload, forKey: "a")
    }
    // Inline: an update or removal of another key puts the entry back.
    #expect(map.update("b", { _ in 1 }) == nil && map.removeValue(forKey: "b") == nil)
    #expect(map.count == 1 && map["a"] === first && first != nil)
    map.insert(Payload(), forKey: "b")
    // A dictionary: the same.
    #expect(map.update("c", { _ in 1 }) == nil && map.removeValue(forKey: "c") == nil)
    #expect(map.count == 2 && map["a"] === first)
    // Back inline, then empty: nothing holds the removed values.
    #expect(map.removeValue(forKey: "a") != nil)
    #expect(first == nil)
    map.removeValue(forKey: "b")
    #expect(map.isEmpty)
  }

  @Test func aSetOfUnitsGoesBackInlineAtOneAndReportsEmptyAtNone() {
    let (first, second) = (EffectToken(lifetime: nil), EffectToken(lifetime: nil))
    var ids = EffectIDs.none
    ids.insert(first.id)
    ids.insert(second.id)
    #expect(ids.count == 2)
    #expect(ids.remove(first.id) == false)
    guard case .one(let remaining) = ids else {
      Issue.record("one id left, but not inline: \(ids)")
      return
    }
    #expect(remaining == second.id && Array(ids) == [second.id])
    #expect(ids.remove(second.id) == true && ids.count == 0)
  }

  @Test func twoUnitsStayInlineInOrderAndAThirdTakesASetUntilTwoAreLeft() {
    let tokens = (0..<3).map { _ in EffectToken(lifetime: nil) }
    var ids = EffectIDs.none
    ids.insert(tokens[0].id)
    ids.insert(tokens[1].id)
    ids.insert(tokens[1].id)  // already there
    guard case .two(let first, let second) = ids else {
      Issue.record("two ids are not inline: \(ids)")
      return
    }
    #expect(first == tokens[0].id && second == tokens[1].id && ids.count == 2)
    #expect(Array(ids) == [tokens[0].id, tokens[1].id] && ids.only == nil)
    #expect(ids.remove(tokens[2].id) == false && ids.count == 2)
    ids.insert(tokens[2].id)
    guard case .many = ids else {
      Issue.record("three ids are not a set: \(ids)")
      return
    }
    #expect(Set(ids) == Set(tokens.map(\.id)))
    #expect(ids.remove(tokens[1].id) == false)
    guard case .two = ids, Set(ids) == [tokens[0].id, tokens[2].id] else {
      Issue.record("two ids left, but not inline: \(ids)")
      return
    }
    #expect(ids.remove(tokens[0].id) == false && ids.only == tokens[2].id)
  }

  @Test func anIdentityOutlivesItsUnitAndDescribesItselfByAddress() {
    var token: EffectToken? = EffectToken(lifetime: nil)
    let id = token!.id
    let address = Unmanaged.passUnretained(token!).toOpaque()
    let same = token!.id
    token = nil
    // The unit is freed: equality, hashing, description and reflection read only the address.
    #expect(id == same && id.hashValue == same.hashValue)
    #expect(String(describing: id) == "EffectID(\(address))")
    var dumped = ""
    dump(id, to: &dumped)
    #expect(dumped.contains("\(address)"))
  }

  /// The sizes the armed store's 1 KB rests on: two identities and their case in two words (an
  /// identity's spare bits hold the case), and a supervisor's state machine in 200 B.
  @Test func aSetOfTwoIdentitiesIsTwoWordsAndTheMachineKeepsItsSize() {
    #expect(MemoryLayout<EffectIDs>.size == 2 * MemoryLayout<Int>.size)
    #expect(MemoryLayout<EffectSupervisor.Machine>.size <= 200)
  }

  @Test func entriesGoFromInlineToADictionaryAndBackToInline() {
    var map = SmallMap<Int, String>()
    map.insert("0", forKey: 0)
    guard case .one(0, "0") = map.storage else {
      Issue.record("one entry is not inline")
      return
    }
    for key in 1..<10 {
      map.insert("\(key)", forKey: key)
    }
    guard case .many = map.storage else {
      Issue.record("ten entries are not a dictionary")
      return
    }
    // A replacement and an update stay in the dictionary.
    map.insert("zero", forKey: 0)
    _ = map.update(1) { $0 += "!" }
    #expect(map.count == 10 && map[0] == "zero" && map[1] == "1!" && map.contains(9))
    #expect(map[1]?.count == 2 && map[10] == nil)
    #expect(Set(map.keys) == Set(0..<10))
    for key in 0..<9 {
      #expect(map.removeValue(forKey: key) != nil)
    }
    guard case .one(let key, let value) = map.storage else {
      Issue.record("one entry left, but not inline")
      return
    }
    #expect(key == 9 && value == "9")
    // From a dictionary of two, a removal goes back inline too, and a miss changes nothing.
    map.insert("a", forKey: 100)
    #expect(map.removeValue(forKey: 7) == nil && map.count == 2)
    #expect(map.removeValue(forKey: 9) == "9")
    guard case .one(100, "a") = map.storage else {
      Issue.record("one entry left, but not inline")
      return
    }
  }

  @Test func aSetOfUnitsGoesToASetAndBackInline() {
    let tokens = (0..<9).map { _ in EffectToken(lifetime: nil) }
    var ids = EffectIDs.none
    for token in tokens { ids.insert(token.id) }
    ids.insert(tokens[0].id)  // already there
    guard case .many = ids else {
      Issue.record("nine ids are not a set")
      return
    }
    #expect(Set(ids) == Set(tokens.map(\.id)))
    for token in tokens.dropFirst() {
      #expect(ids.remove(token.id) == false)
    }
    #expect(ids.only == tokens[0].id)
    ids.insert(tokens[1].id)
    #expect(ids.remove(tokens[2].id) == false && ids.count == 2)
    #expect(ids.remove(tokens[1].id) == false && ids.only == tokens[0].id)
    #expect(ids.remove(tokens[0].id) == true && ids.count == 0)
  }

  @Test func aMachineWithOneLiveEffectKeepsItsRecordsInline() {
    var machine = EffectStateMachine<String, String, String>()
    let unit = EffectToken(lifetime: nil)
    let key = CancelKey("id", scope: nil)
    machine.register(unit, keys: [key])
    #expect(machine.liveCount == 1 && machine.registeredIdentifierCount == 1)
    _ = machine.start(unit.id, in: "task")
    guard case .finished = machine.finish(unit.id) else {
      Issue.record("the unit did not finish")
      return
    }
    #expect(machine.liveCount == 0 && machine.registeredIdentifierCount == 0)
    #expect(machine.isFinished(unit))
  }
}

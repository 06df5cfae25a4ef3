import Testing

@testable import Unidirectional

/// Cancellation identifiers as the runtime keys them: by type and value, with the hash computed
/// on demand (it is not stored in the identifier's box).
@Suite struct CancelKeyTests {
  private enum CancelID: Hashable, Sendable { case timer, other }

  @Test func equalIdentifiersAreEqualKeysWithEqualHashes() {
    let first = CancelKey(CancelID.timer, scope: nil)
    let second = CancelKey(CancelID.timer, scope: nil)
    #expect(first == second)
    #expect(first.hashValue == second.hashValue)
    #expect(first != CancelKey(CancelID.other, scope: nil))
  }

  @Test func equalValuesOfDifferentTypesAreDifferentKeys() {
    let int = CancelKey(1 as Int, scope: nil)
    let byte = CancelKey(1 as UInt8, scope: nil)
    let string = CancelKey("1", scope: nil)
    #expect(int != byte && int != string && byte != string)
    #expect(Set([int, byte, string, CancelKey(1 as Int, scope: nil)]).count == 3)
  }

  @Test func aThousandKeysInADictionaryAreEachFoundAgain() {
    var keyed: [CancelKey: Int] = [:]
    for value in 0..<1_000 {
      keyed[CancelKey(value, scope: nil)] = value
      keyed[CancelKey(UInt16(value), scope: nil)] = -value
    }
    #expect(keyed.count == 2_000)
    for value in 0..<1_000 {
      let int: Int = value
      #expect(keyed[CancelKey(int, scope: nil)] == value)
      #expect(keyed[CancelKey(UInt16(value), scope: nil)] == -value)
    }
  }
}

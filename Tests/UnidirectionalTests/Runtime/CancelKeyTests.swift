import Testing
import UnidirectionalTesting

@testable import Unidirectional

/// Cancellation identifiers as the runtime keys them: by type and value, with the hash computed
/// on demand (it is not stored in the identifier's box), plain identifiers of at most 8 bytes kept
/// in place, compared and hashed by their type's own `==` and `hash(into:)`.
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

  /// A plain type whose own `==` equates values with different bits (modulo 10).
  private struct Modulo: Hashable, Sendable {
    let value: Int
    static func == (lhs: Self, rhs: Self) -> Bool { lhs.value % 10 == rhs.value % 10 }
    func hash(into hasher: inout Hasher) { hasher.combine(self.value % 10) }
  }

  /// A plain type with padding between its fields.
  private struct Padded: Hashable, Sendable {
    let flag: UInt8
    let code: UInt16
  }

  /// A type of more than 8 bytes.
  private struct Wide: Hashable, Sendable {
    let first: Int
    let second: Int
  }

  @Test func plainIdentifiersOfAtMostEightBytesAreKeptInPlaceAndOthersBoxed() {
    func isInline(_ key: CancelKey) -> Bool {
      if case .inline = key.identity { return true }
      return false
    }
    #expect(isInline(CancelKey(CancelID.timer, scope: nil)))
    #expect(isInline(CancelKey(42, scope: nil)))
    #expect(isInline(CancelKey(Padded(flag: 1, code: 2), scope: nil)))
    #expect(!isInline(CancelKey("timer", scope: nil)))
    #expect(!isInline(CancelKey(Wide(first: 1, second: 2), scope: nil)))
    #expect(MemoryLayout<CancelIdentity>.size == 16)
  }

  @Test func anIdentifierKeptInPlaceIsComparedAndHashedByItsTypesOwnEquality() {
    let three = CancelKey(Modulo(value: 3), scope: nil)
    let thirteen = CancelKey(Modulo(value: 13), scope: nil)
    #expect(three == thirteen)
    #expect(three.hashValue == thirteen.hashValue)
    #expect(three != CancelKey(Modulo(value: 4), scope: nil))
    #expect(CancelKey(0.0, scope: nil) == CancelKey(-0.0, scope: nil))
    #expect(CancelKey(0.0, scope: nil).hashValue == CancelKey(-0.0, scope: nil).hashValue)
    #expect(
      CancelKey(Padded(flag: 1, code: 2), scope: nil)
        == CancelKey(Padded(flag: 1, code: 2), scope: nil)
    )
    #expect(
      CancelKey(Padded(flag: 1, code: 2), scope: nil)
        != CancelKey(Padded(flag: 1, code: 3), scope: nil)
    )
    #expect(CancelKey(Modulo(value: 3), scope: nil) != CancelKey(3, scope: nil))
  }

  @Test func identifiersAreDescribedAsWritten() {
    #expect(CancelKey(CancelID.timer, scope: nil).description == "timer")
    #expect(CancelKey(-7, scope: nil).description == "-7")
    #expect(CancelKey("search", scope: nil).description == "search")
    #expect(CancelKey(Wide(first: 1, second: 2), scope: nil).description.contains("second: 2"))
  }

  @Test func aTimerIsCancelledByAnIdentifierItsTypeCallsEqualThoughItsBitsDiffer() async {
    let clock = TestClock()
    let store = TestStore(initialState: 0) {
      Reduce<Int, Int> { state, action in
        switch action {
        case 0:
          return .send(1, after: .seconds(1), clock: clock).cancellable(id: Modulo(value: 3))
        case 1:
          state += 1
          return .none
        default:
          return .cancel(id: Modulo(value: 13))
        }
      }
    }
    await store.send(0)
    await store.send(2)
    await clock.advance(by: .seconds(1))
    await store.finish()
    #expect(store.state == 0)
  }
}

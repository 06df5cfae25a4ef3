import Testing

@testable import Unidirectional

/// The box behind the state machine's rarely used fields: nothing allocated until a write, and
/// value semantics once there is a box.
@Suite struct OutOfLineTests {
  private struct Fields: EmptyInitializable, Sendable {
    var waiters: [Int: String] = [:]
    var next = 0
  }

  @Test func readingAnUnwrittenValueReadsTheEmptyOneAndAllocatesNothing() {
    let fields = OutOfLine<Fields>()
    #expect(fields.value.waiters.isEmpty && fields.value.next == 0)
    #expect(!fields.isAllocated)
  }

  @Test func aReadGivesTheUnallocatedValueUntilTheFirstWriteThenTheValue() {
    var fields = OutOfLine<Fields>()
    #expect(fields.read({ $0.next }, unallocated: -1) == -1)
    #expect(!fields.isAllocated)
    fields.value.next = 3
    #expect(fields.read({ $0.next }, unallocated: -1) == 3)
  }

  @Test func theFirstWriteAllocatesAndLaterWritesLand() {
    var fields = OutOfLine<Fields>()
    fields.value.next += 1
    fields.value.waiters[1] = "a"
    fields.value.next += 1
    #expect(fields.isAllocated)
    #expect(fields.value.next == 2 && fields.value.waiters == [1: "a"])
  }

  @Test func aCopyIsIndependentOfTheOriginalInBothDirections() {
    var original = OutOfLine<Fields>()
    original.value.waiters[1] = "a"
    var copy = original
    copy.value.waiters[2] = "b"
    #expect(original.value.waiters == [1: "a"])
    #expect(copy.value.waiters == [1: "a", 2: "b"])
    original.value.next = 7
    #expect(copy.value.next == 0 && original.value.next == 7)
  }

  @Test func aStateMachineCopiedBeforeItsFirstThrottleKeepsNoneOfTheCopysState() {
    typealias Machine = EffectStateMachine<Int, Int, Int>
    let key = CancelKey("throttled")
    var machine = Machine()
    let copy = machine
    machine.throttles.withState(for: key) { $0.isHolding = true }
    #expect(machine.throttles.count == 1)
    #expect(copy.throttles.count == 0)
  }
}

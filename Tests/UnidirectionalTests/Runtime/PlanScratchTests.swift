import Foundation
import Synchronization
import Testing

@testable import Unidirectional

/// The planner's arrays are lent per thread: a nested use on the same thread gets arrays of its
/// own, and whichever returns first refills the thread's slot.
@Suite struct PlanScratchTests {
  @Test func aNestedBorrowOnTheSameThreadGetsItsOwnArraysAndNothingIsShared() {
    var outer = EffectPlanner<Int>()
    var inner = EffectPlanner<Int>()
    outer.borrowScratch()
    outer.steps.append(.cancel(CancelKeys(CancelKey("outer", scope: nil))))
    // While `outer` holds the thread's arrays, `inner` borrows empty ones of its own.
    inner.borrowScratch()
    #expect(inner.steps.isEmpty)
    inner.steps.append(.cancel(CancelKeys(CancelKey("inner", scope: nil))))
    #expect(outer.steps.count == 1)
    inner.steps.removeAll(keepingCapacity: true)
    inner.returnScratch()
    #expect(!inner.holdsScratch)
    #expect(inner.steps.capacity == 0)
    // The thread's slot now holds `inner`'s arrays; `outer`'s are dropped when it returns.
    outer.steps.removeAll(keepingCapacity: true)
    outer.returnScratch()
    #expect(!outer.holdsScratch)
    #expect(outer.steps.capacity == 0)
    #expect(PlanScratch.withCurrent { $0.steps.isEmpty })
    #expect(PlanScratch.withCurrent { $0.steps.capacity } > 0)
  }

  @Test func arraysGrownLargeAreNotKeptByTheThread() {
    var planner = EffectPlanner<Int>()
    planner.borrowScratch()
    for index in 0..<200 {
      planner.steps.append(.cancel(CancelKeys(CancelKey(index, scope: nil))))
    }
    planner.steps.removeAll(keepingCapacity: true)
    planner.returnScratch()
    #expect(planner.steps.capacity == 0)
    #expect(PlanScratch.withCurrent { $0.steps.capacity } == 0)
  }

  @Test func eachThreadHasItsOwnScratchAndKeepsItAcrossUses() {
    let here = PlanScratch.withCurrent { ObjectIdentifier($0) }
    #expect(PlanScratch.withCurrent { ObjectIdentifier($0) } == here)
    let other = Mutex<ObjectIdentifier?>(nil)
    let done = DispatchSemaphore(value: 0)
    let thread = Thread {
      other.withLock { $0 = PlanScratch.withCurrent { ObjectIdentifier($0) } }
      done.signal()
    }
    thread.start()
    done.wait()
    #expect(other.withLock { $0 } != nil)
    #expect(other.withLock { $0 } != here)
  }
}

import Testing

@testable import Unidirectional

/// The variadic `merge` takes a fast path when no part is `.none` or a merge: its result must be
/// the one the general path gives.
@Suite struct EffectMergeShapeTests {
  private func parts(_ effect: Effect<Int>) -> Int? {
    switch effect.operation {
    case .none: 0
    case .merge(let parts): parts.count
    default: nil
    }
  }

  @Test func plainPartsAreKeptInOrder() {
    let merged = Effect<Int>.merge(.send(1), .send(2), .send(3))
    guard case .merge(let parts) = merged.operation else {
      Issue.record("not a merge: \(merged.operation)")
      return
    }
    let actions = parts.compactMap { part -> Int? in
      if case .send(let action) = part.operation { return action }
      return nil
    }
    #expect(actions == [1, 2, 3])
  }

  @Test func noneIsDroppedAndNestedMergesAreFlattened() {
    #expect(self.parts(.merge(.send(1), .none, .merge(.send(2), .send(3)))) == 3)
    #expect(self.parts(.merge(.none, .none)) == 0)
    #expect(self.parts(Effect<Int>.merge()) == 0)
  }

  @Test func oneRealPartIsThatPart() {
    guard case .send(7) = Effect<Int>.merge(.send(7)).operation else {
      Issue.record("one part should be itself")
      return
    }
    guard case .send(8) = Effect<Int>.merge(.none, .send(8)).operation else {
      Issue.record("one part among .nones should be itself")
      return
    }
  }
}

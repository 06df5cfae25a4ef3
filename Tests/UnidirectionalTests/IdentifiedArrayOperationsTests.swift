import Foundation
import Testing
import Unidirectional

/// Every mutation of `IdentifiedArray`, against the array of unique ids it models.
@Suite struct IdentifiedArrayOperationsTests {
  private struct Row: Identifiable, Equatable, Comparable, Hashable, Codable, Sendable {
    var id: Int
    var title: String

    static func < (lhs: Row, rhs: Row) -> Bool { lhs.title < rhs.title }
  }

  private var rows: IdentifiedArrayOf<Row> {
    [Row(id: 1, title: "c"), Row(id: 2, title: "a"), Row(id: 3, title: "b")]
  }

  @Test func settingByIDReplacesAppendsOrRemoves() {
    var array = self.rows
    array[id: 2] = Row(id: 2, title: "A")
    array[id: 9] = Row(id: 9, title: "z")
    array[id: 1] = nil
    #expect(array.map(\.id) == [2, 3, 9])
    #expect(array[id: 2]?.title == "A")
    #expect(array.contains(id: 9) && !array.contains(id: 1))
  }

  @Test func appendingContentsSkipsIDsAlreadyPresent() {
    var array = self.rows
    array.append(contentsOf: [Row(id: 2, title: "dup"), Row(id: 4, title: "d")])
    #expect(array.map(\.id) == [1, 2, 3, 4])
    #expect(array[id: 2]?.title == "a")
    #expect(array.insert(Row(id: 3, title: "dup"), at: 0) == (false, 2))
  }

  @Test func updateOrAppendReturnsWhatItReplaced() {
    var array = self.rows
    #expect(array.updateOrAppend(Row(id: 2, title: "new")) == Row(id: 2, title: "a"))
    #expect(array.updateOrAppend(Row(id: 5, title: "e")) == nil)
    #expect(array.map(\.title) == ["c", "new", "b", "e"])
  }

  @Test func removingByPositionOffsetsOrPredicate() {
    var array = self.rows
    #expect(array.remove(at: 1) == Row(id: 2, title: "a"))
    #expect(array.map(\.id) == [1, 3])
    array = self.rows
    array.remove(atOffsets: [0, 2])
    #expect(array.map(\.id) == [2])
    array = self.rows
    array.removeAll { $0.title != "b" }
    #expect(array.map(\.id) == [3])
    array.removeAll()
    #expect(array.isEmpty && !array.contains(id: 3))
  }

  @Test func sortingAndUpdatingEachKeepIDsAndElementsTogether() {
    var array = self.rows
    array.sort()
    #expect(array.map(\.id) == [2, 3, 1])
    array.updateEach { $0.title += "!" }
    #expect(array.map(\.title) == ["a!", "b!", "c!"])
    #expect(array[id: 1]?.title == "c!")
  }

  @Test func encodesAsAnArrayAndRefusesDuplicateIDsWhenDecoding() throws {
    let data = try JSONEncoder().encode(self.rows)
    #expect(try JSONDecoder().decode([Row].self, from: data) == self.rows.elements)
    #expect(try JSONDecoder().decode(IdentifiedArrayOf<Row>.self, from: data) == self.rows)
    let duplicate = try JSONEncoder().encode([Row(id: 1, title: "x"), Row(id: 1, title: "y")])
    #expect(throws: DecodingError.self) {
      try JSONDecoder().decode(IdentifiedArrayOf<Row>.self, from: duplicate)
    }
  }

  @Test func printsAndMirrorsLikeAnArray() {
    let array: IdentifiedArrayOf<Row> = [Row(id: 1, title: "x")]
    #expect(array.description == [Row(id: 1, title: "x")].description)
    #expect(Mirror(reflecting: array).displayStyle == .collection)
    #expect(Mirror(reflecting: array).children.count == 1)
    #expect(Set([array, array]).count == 1)
  }
}

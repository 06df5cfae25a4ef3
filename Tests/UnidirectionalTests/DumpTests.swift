import Testing

@testable import Unidirectional

private struct Profile: Equatable {
  enum Role: Equatable { case admin, member(since: Int, note: String?) }
  var name: String
  var roles: [Role]
  var scores: [String: Int]
  var tags: Set<String>
  var manager: String?
}

@Suite(.timeLimit(.minutes(2))) struct DumpTests {
  @Test func dumpsNestedValuesDeterministically() {
    let profile = Profile(
      name: "Ada",
      roles: [.admin, .member(since: 2020, note: nil)],
      scores: ["b": 2, "a": 1],
      tags: ["z", "y"],
      manager: nil
    )
    #expect(
      customDump(profile) == """
        Profile(
          name: "Ada",
          roles: [
            [0]: .admin,
            [1]: .member(since: 2020, note: nil)
          ],
          scores: [
            "a": 1,
            "b": 2
          ],
          tags: Set([
            "y",
            "z"
          ]),
          manager: nil
        )
        """
    )
  }

  @Test func diffShowsOnlyChangedLinesWithContext() {
    var before = Profile(name: "Ada", roles: [], scores: [:], tags: [], manager: nil)
    for index in 0..<10 { before.scores["k\(index)"] = index }
    var after = before
    after.scores["k5"] = 50
    after.manager = "Grace"
    #expect(
      diffDumps(customDump(before), customDump(after)) == """
          Profile(
          … (6 unchanged)
              "k3": 3,
              "k4": 4,
        -     "k5": 5,
        +     "k5": 50,
              "k6": 6,
              "k7": 7,
          … (2 unchanged)
            ],
            tags: Set([]),
        -   manager: nil
        +   manager: "Grace"
          )
        """
    )
    #expect(diffDumps(customDump(before), customDump(before)) == nil)
  }
}

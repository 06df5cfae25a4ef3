// The README's program and test: the program is `Sources/Examples/ReadmeExample`, compiled and run
// here, and the README must show it (and the test below) word for word.
import Foundation
import Testing
import Unidirectional
import UnidirectionalTesting

@testable import ReadmeExample

@Suite(.timeLimit(.minutes(1))) struct ReadmeTests {
  private static let root = URL(fileURLWithPath: #filePath)
    .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

  /// The fenced Swift blocks of the README, in order.
  private static func readmeSwiftBlocks() throws -> [String] {
    let readme = try String(
      contentsOf: Self.root.appendingPathComponent("README.md"),
      encoding: .utf8
    )
    var blocks: [String] = []
    var current: [Substring]?
    for line in readme.split(separator: "\n", omittingEmptySubsequences: false) {
      if line == "```swift" {
        current = []
      } else if line == "```", let lines = current {
        blocks.append(lines.joined(separator: "\n"))
        current = nil
      } else {
        current?.append(line)
      }
    }
    return blocks
  }

  @Test func theReadmeShowsTheProgramThatIsCompiled() throws {
    let program = try String(
      contentsOf: Self.root.appendingPathComponent(
        "Sources/Examples/ReadmeExample/ReadmeExample.swift"
      ),
      encoding: .utf8
    )
    let blocks = try Self.readmeSwiftBlocks()
    #expect(blocks.first.map { $0 + "\n" } == program)
  }

  @Test func theReadmeShowsThisTest() throws {
    let source = try String(contentsOf: URL(fileURLWithPath: #filePath), encoding: .utf8)
    let start = try #require(source.range(of: "    // README test begin\n"))
    let end = try #require(source.range(of: "    // README test end\n"))
    let body = source[start.upperBound..<end.lowerBound]
      .split(separator: "\n", omittingEmptySubsequences: false)
      .map { $0.dropFirst(4) }
      .joined(separator: "\n")
    let blocks = try Self.readmeSwiftBlocks()
    #expect(blocks.count >= 2 && blocks[1] + "\n" == body)
  }

  /// The `effects-basics` transcript in the README is what the program prints.
  @Test func theReadmeTranscriptIsWhatEffectsBasicsPrints() async throws {
    let readme = try String(
      contentsOf: Self.root.appendingPathComponent("README.md"),
      encoding: .utf8
    )
    let start = try #require(readme.range(of: "$ printf '"))
    let afterCommand = readme[start.upperBound...]
    let inputEnd = try #require(afterCommand.range(of: "' | swift run effects-basics\n"))
    let input = afterCommand[..<inputEnd.lowerBound].replacingOccurrences(of: "\\n", with: "\n")
    let transcriptEnd = try #require(afterCommand.range(of: "```"))
    let transcript = String(afterCommand[inputEnd.upperBound..<transcriptEnd.lowerBound])
    let printed = try await runExample("effects-basics", input: Data(input.utf8)).output
    #expect(printed == transcript)
  }

  @Test func theReadmeTest() async {
    // README test begin
    let clock = TestClock()
    let store = TestStore(initialState: Counter.State()) { Counter(clock: clock) }
    await store.send(.decrementTapped) { $0.count = -1 }
    await clock.advance(by: .seconds(1))
    await store.receive(.delayedIncrement) { $0.count = 0 }
    // README test end
  }
}

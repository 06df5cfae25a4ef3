import AsyncHTTPClient
import Foundation
import NIOCore
import Testing

/// The README's server snippet is `Sources/ReadmeServer`'s code, and that server runs.
@Suite(.timeLimit(.minutes(1)))
struct ReadmeServerTests {
  /// The package's folder (Integrations/), found from this file.
  static let packageFolder = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
    .deletingLastPathComponent().deletingLastPathComponent()

  @Test func theREADMEsServerSnippetIsTheExamplesCodeWordForWord() throws {
    let source = try String(
      contentsOf: Self.packageFolder.appendingPathComponent(
        "Sources/ReadmeServer/ReadmeServer.swift"
      ),
      encoding: .utf8
    )
    let readme = try String(
      contentsOf: Self.packageFolder.deletingLastPathComponent().appendingPathComponent(
        "README.md"
      ),
      encoding: .utf8
    )
    let begin = try #require(source.range(of: "// README:begin\n"))
    let end = try #require(source.range(of: "    // README:end"))
    let snippet = source[begin.upperBound..<end.lowerBound].split(
      separator: "\n",
      omittingEmptySubsequences: false
    )
    .map { $0.hasPrefix("    ") ? String($0.dropFirst(4)) : String($0) }
    .joined(separator: "\n")
    #expect(snippet.count > 500)
    #expect(readme.contains(snippet), "README.md's server snippet differs from ReadmeServer.swift")
  }

  @Test(
    .enabled(
      if: readmeServerBinary != nil,
      "the readme-server binary is not built next to the tests"
    )
  )
  func theREADMEsServerStartsOnSQLiteAnswersAPostAndAGetAndExitsZero() async throws {
    let directory = try temporaryDirectory()
    defer { try? FileManager.default.removeItem(at: directory) }
    let process = Process()
    process.executableURL = readmeServerBinary
    process.arguments = [
      "--port", "0", "--path", directory.appendingPathComponent("c.sqlite").path,
    ]
    let errors = Pipe()
    process.standardError = errors
    process.standardOutput = FileHandle.nullDevice
    try process.run()
    defer { if process.isRunning { kill(process.processIdentifier, SIGKILL) } }
    let line = await offThePool { () -> String in
      var data = Data()
      while !String(decoding: data, as: UTF8.self).contains("listening on") {
        let chunk = errors.fileHandleForReading.availableData
        if chunk.isEmpty { break }
        data.append(chunk)
      }
      return String(decoding: data, as: UTF8.self)
    }
    let range = try #require(line.range(of: #"127\.0\.0\.1:\d+"#, options: .regularExpression))
    let url = "http://\(line[range])"
    let client = HTTPClient(eventLoopGroupProvider: .singleton)
    var add = HTTPClientRequest(url: "\(url)/carts/alice/items")
    add.method = .POST
    add.headers.add(name: "content-type", value: "application/json")
    add.body = .bytes(ByteBuffer(string: #"{"item": "apple", "quantity": 2}"#))
    let added = try await client.execute(add, timeout: .seconds(10))
    #expect(added.status == .ok)
    let addedBody = String(buffer: try await added.body.collect(upTo: 1 << 16))
    #expect(addedBody.contains(#""apple":2"#))
    let read = try await client.execute(
      HTTPClientRequest(url: "\(url)/carts/alice"),
      timeout: .seconds(10)
    )
    #expect(read.status == .ok)
    #expect(String(buffer: try await read.body.collect(upTo: 1 << 16)).contains(#""apple":2"#))
    try await client.shutdown()
    kill(process.processIdentifier, SIGTERM)
    let status = await offThePool {
      process.waitUntilExit()
      return process.terminationStatus
    }
    #expect(status == 0)
  }
}

/// The `readme-server` binary built next to this test bundle.
let readmeServerBinary: URL? = {
  let url = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
    .appendingPathComponent("readme-server")
  return FileManager.default.isExecutableFile(atPath: url.path) ? url : nil
}()

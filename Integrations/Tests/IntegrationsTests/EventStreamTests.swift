import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import Testing

@testable import CartServer

#if canImport(Glibc)
import Glibc
#endif

/// `GET /carts/{c}/events` ends on shutdown, as API.md says, not whenever its cart's store does:
/// a cart watched through an erasure (or an idle timeout, which ends the store the same way)
/// goes on streaming its changes.
@Suite(.timeLimit(.minutes(1))) struct EventStreamTests {
  @Test func aStreamFollowsItsCartThroughAnErasureAndStreamsWhatComesNext() async throws {
    let directory = try temporaryDirectory()
    defer { try? FileManager.default.removeItem(at: directory) }
    let path = directory.appendingPathComponent("carts.sqlite").path
    let server = try await CartServerProcess(["--storage", "sqlite:\(path)"])
    let client = HTTPClient(eventLoopGroupProvider: .singleton)
    do {
      var events = try await EventReader(client, "\(server.url)/carts/alice/events")
      #expect(try await events.next().contains(#""version":0"#))
      #expect(try await add("apple", to: server, client) == .ok)
      #expect(try await events.next().contains(#""apple":1"#))
      var erase = HTTPClientRequest(url: "\(server.url)/carts/alice")
      erase.method = .DELETE
      #expect(try await client.execute(erase, timeout: .seconds(10)).status == .noContent)
      // The erased cart's store is gone; the stream goes on with the cart as it is now.
      let erased = try await events.next()
      #expect(erased.contains(#""items":{}"#) && erased.contains(#""version":0"#), "\(erased)")
      #expect(try await add("pear", to: server, client) == .ok)
      #expect(try await events.next().contains(#""pear":1"#))
    } catch {
      try? await client.shutdown()
      throw error
    }
    try await client.shutdown()
    // And a graceful shutdown still ends it (the server would not exit 0 while it ran).
    #expect(await server.stop(SIGTERM) == 0)
  }
}

/// Adds one `item` to alice's cart; the answer's status.
private func add(
  _ item: String,
  to server: CartServerProcess,
  _ client: HTTPClient
) async throws -> HTTPResponseStatus {
  var request = HTTPClientRequest(url: "\(server.url)/carts/alice/items")
  request.method = .POST
  request.body = .bytes(ByteBuffer(string: #"{"item": "\#(item)", "quantity": 1}"#))
  return try await client.execute(request, timeout: .seconds(10)).status
}

/// The `data:` lines of an event stream, one event at a time, however the body's chunks fall.
private struct EventReader {
  private var body: HTTPClientResponse.Body.AsyncIterator
  private var pending = ""

  init(_ client: HTTPClient, _ url: String) async throws {
    let response = try await client.execute(HTTPClientRequest(url: url), timeout: .seconds(30))
    guard response.status == .ok else { throw LoadError("the stream answered \(response.status)") }
    self.body = response.body.makeAsyncIterator()
  }

  /// The next event's data; throws if the stream ends first.
  mutating func next() async throws -> String {
    while true {
      if let end = self.pending.range(of: "\n\n") {
        let event = String(self.pending[..<end.lowerBound])
        self.pending = String(self.pending[end.upperBound...])
        return event
      }
      guard let chunk = try await self.body.next() else {
        throw LoadError("the stream ended; it had '\(self.pending)' left")
      }
      self.pending += String(buffer: chunk)
    }
  }
}

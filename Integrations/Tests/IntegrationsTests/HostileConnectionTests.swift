import AsyncHTTPClient
import Foundation
import NIOCore
import Testing

@testable import CartServer

#if canImport(Glibc)
import Glibc
#endif

/// Clients that hold a connection without finishing a request: the server takes the connection
/// back, so such clients cannot use up its descriptors, and a long response is never cut.
@Suite struct HostileConnectionTests {
  @Test func aConnectionThatNeverFinishesItsRequestIsClosedButAnEventStreamStaysOpen()
    async throws
  {
    let server = try await CartServerProcess([
      "--storage", "memory", "--connection-idle-seconds", "0.5",
    ])
    let client = HTTPClient(eventLoopGroupProvider: .singleton)
    do {
      let events = try await client.execute(
        HTTPClientRequest(url: "\(server.url)/carts/alice/events"),
        timeout: .seconds(30)
      )
      #expect(events.status == .ok)
      var stream = events.body.makeAsyncIterator()
      let first = try await stream.next().map { String(buffer: $0) } ?? ""
      #expect(first.contains(#""version":0"#), "\(first)")

      // A request's head, dribbled and never ended: the server closes the connection. The
      // receive timeout only bounds the test; the server's own idle timeout is what ends it.
      let read = await offThePool {
        sendThenReadUntilClosed(port: server.port, "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n")
      }
      #expect(read == .closedByServer, "\(read)")

      // The stream opened before it has been open longer than the idle timeout, and still
      // carries the next change.
      var add = HTTPClientRequest(url: "\(server.url)/carts/alice/items")
      add.method = .POST
      add.body = .bytes(ByteBuffer(string: #"{"item": "apple", "quantity": 1}"#))
      let added = try await client.execute(add, timeout: .seconds(10))
      #expect(added.status == .ok)
      let next = try await stream.next().map { String(buffer: $0) } ?? ""
      #expect(next.contains(#""apple":1"#), "\(next)")
    } catch {
      try? await client.shutdown()
      throw error
    }
    try await client.shutdown()
    #expect(await server.stop(SIGTERM) == 0)
  }
}

extension HostileConnectionTests {
  @Test func aBodyDeclaredPastTheLimitIs413BeforeItIsSentAndABadChunkIs400() async throws {
    let server = try await CartServerProcess(["--storage", "memory"])
    let port = server.port
    let tooLarge = try await answer(
      port: port,
      "POST /carts/alice/items HTTP/1.1\r\nHost: x\r\nContent-Length: 100000000\r\n\r\n{"
    )
    #expect(tooLarge.hasPrefix("HTTP/1.1 413"), "\(tooLarge)")
    #expect(tooLarge.hasSuffix(#"{"error":"Content Too Large"}"#), "\(tooLarge)")
    let badChunk = try await answer(
      port: port,
      "POST /carts/alice/items HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
        + "Connection: close\r\n\r\nzz\r\nabc\r\n0\r\n\r\n"
    )
    #expect(badChunk.hasPrefix("HTTP/1.1 400"), "\(badChunk)")
    #expect(
      badChunk.hasSuffix(
        #"{"error":"the request's body is not valid HTTP/1.1: invalid character in chunk size header"}"#
      ),
      "\(badChunk)"
    )
    // Neither touched the cart, and the server serves on.
    let read = try await answer(
      port: port,
      "GET /carts/alice HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    #expect(read.hasSuffix(#"{"customer":"alice","items":{},"version":0}"#), "\(read)")
    #expect(await server.stop(SIGTERM) == 0)
  }
}

/// The whole response to `text` sent raw to `port`; fails the test when none came.
func answer(port: Int, _ text: String) async throws -> String {
  let outcome = await offThePool { sendThenReadUntilClosed(port: port, text) }
  guard case .answered(let response) = outcome else {
    throw LoadError("no answer to a raw request: \(outcome)")
  }
  return response
}

/// What a raw connection saw after it sent its bytes.
enum RawOutcome: Equatable {
  case closedByServer
  case answered(String)
  case stillOpenAfter20Seconds
  case failed(Int32)
}

/// Connects to `port`, sends `text` as it is (HTTP no client library would send), and reads until
/// a whole response came or the server closed the connection.
func sendThenReadUntilClosed(port: Int, _ text: String) -> RawOutcome {
  let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
  guard fd >= 0 else { return .failed(errno) }
  defer { close(fd) }
  var timeout = timeval(tv_sec: 20, tv_usec: 0)
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
  var address = sockaddr_in()
  address.sin_family = sa_family_t(AF_INET)
  address.sin_port = in_port_t(UInt16(port).bigEndian)
  address.sin_addr.s_addr = inet_addr("127.0.0.1")
  let connected = withUnsafePointer(to: &address) {
    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
      connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
    }
  }
  guard connected == 0 else { return .failed(errno) }
  let bytes = Array(text.utf8)
  guard send(fd, bytes, bytes.count, 0) == bytes.count else { return .failed(errno) }
  var buffer = [UInt8](repeating: 0, count: 4096)
  var received: [UInt8] = []
  while true {
    let count = recv(fd, &buffer, buffer.count, 0)
    if count > 0 {
      received += buffer[..<count]
      // A whole response (its head and the body its Content-Length gives) is an answer, whether
      // or not the server then closes the connection.
      let text = String(decoding: received, as: UTF8.self)
      let parts = text.split(separator: "\r\n\r\n", maxSplits: 1, omittingEmptySubsequences: false)
      if parts.count == 2,
        let field = parts[0].split(separator: "\r\n")
          .first(where: { $0.lowercased().hasPrefix("content-length:") }),
        let length = Int(
          field.dropFirst("content-length:".count).trimmingCharacters(in: .whitespaces)
        ),
        parts[1].utf8.count >= length
      {
        return .answered(text)
      }
    } else if count == 0 {
      guard received.isEmpty else { return .answered(String(decoding: received, as: UTF8.self)) }
      return .closedByServer
    } else if errno == EAGAIN || errno == EWOULDBLOCK {
      return .stillOpenAfter20Seconds
    } else if errno == ECONNRESET {
      return .closedByServer
    } else {
      return .failed(errno)
    }
  }
}

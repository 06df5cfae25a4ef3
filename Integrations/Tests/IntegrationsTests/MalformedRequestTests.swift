import HTTPTypes
import Hummingbird
import HummingbirdTesting
import NIOCore
import Testing
import UnidirectionalServer

/// A request Hummingbird's parser refuses gets the same JSON error body as every other error.
@Suite struct MalformedRequestTests {
  func app() -> some ApplicationProtocol {
    let router = Router()
    router.get("/hello") { _, _ in "hi" }
    router.get("/refused") { _, _ -> Response in
      Response(
        status: .badRequest,
        headers: [.contentType: "application/json"],
        body: .init(byteBuffer: ByteBuffer(string: #"{"error":"mine"}"#))
      )
    }
    return Application(
      router: router,
      server: .http1(configuration: .init(additionalChannelHandlers: [MalformedRequestHandler()])),
      configuration: .init(address: .hostname("127.0.0.1", port: 0))
    )
  }

  @Test func headersPastTheParsersLimitAreAnsweredWithAJSONError() async throws {
    try await self.app().test(.live) { client in
      let big = String(repeating: "a", count: 100_000)
      try await client.execute(
        uri: "/hello",
        method: .get,
        headers: [HTTPField.Name("X-Big")!: big]
      ) { response in
        #expect(response.status == .badRequest)
        #expect(response.headers[.contentType] == "application/json; charset=utf-8")
        #expect(
          String(buffer: response.body)
            == #"{"error":"the request is not valid HTTP/1.1: its request line or headers are malformed or too large"}"#
        )
      }
    }
  }

  @Test func everyOtherAnswerPassesUnchanged() async throws {
    try await self.app().test(.live) { client in
      try await client.execute(uri: "/hello", method: .get) { response in
        #expect(response.status == .ok)
        #expect(String(buffer: response.body) == "hi")
      }
      try await client.execute(uri: "/refused", method: .get) { response in
        #expect(response.status == .badRequest)
        #expect(String(buffer: response.body) == #"{"error":"mine"}"#)
      }
      try await client.execute(uri: "/nowhere", method: .get) { response in
        #expect(response.status == .notFound)
      }
    }
  }
}

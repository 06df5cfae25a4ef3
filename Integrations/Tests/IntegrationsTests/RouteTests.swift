import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import NIOCore
import Prometheus
import Testing
import Unidirectional
import UnidirectionalServer

@testable import CartServer

private func makeCarts(_ storage: InMemorySessionStorage<String, Cart.State>? = nil) -> Carts {
  Carts(storage: storage, owner: "test") {
    Cart.State(customer: $0)
  } reducer: {
    Cart()
  }
}

func decodeCart(_ buffer: ByteBuffer) throws -> Cart.State {
  try JSONDecoder().decode(Cart.State.self, from: Data(buffer: buffer))
}

@Suite(.timeLimit(.minutes(1))) struct RouteTests {
  @Test func addReadAndRemoveItems() async throws {
    let storage = InMemorySessionStorage<String, Cart.State>()
    let carts = makeCarts(storage)
    let app = Application(router: makeRouter(carts: carts))
    try await app.test(.router) { client in
      try await client.execute(uri: "/health", method: .get) { response in
        #expect(response.status == .ok)
        #expect(String(buffer: response.body) == "ok")
      }
      // A balancer's health check often asks with HEAD.
      try await client.execute(uri: "/health", method: .head) { response in
        #expect(response.status == .ok)
        #expect(response.body.readableBytes == 0)
      }
      try await client.execute(
        uri: "/carts/alice/items",
        method: .post,
        body: ByteBuffer(string: #"{"item": "apple", "quantity": 2}"#)
      ) { response in
        #expect(response.status == .ok)
        let cart = try decodeCart(response.body)
        #expect(cart == Cart.State(customer: "alice", items: ["apple": 2], version: 1))
      }
      // Acknowledged means stored.
      #expect(storage.storedState(for: "alice")?.items == ["apple": 2])
      try await client.execute(
        uri: "/carts/alice/items",
        method: .post,
        body: ByteBuffer(string: #"{"item": "pear", "quantity": 1}"#)
      ) { response in
        let cart = try decodeCart(response.body)
        #expect(cart.version == 2)
      }
      try await client.execute(uri: "/carts/alice/items/apple", method: .delete) { response in
        #expect(response.status == .ok)
        let cart = try decodeCart(response.body)
        #expect(cart == Cart.State(customer: "alice", items: ["pear": 1], version: 3))
      }
      try await client.execute(uri: "/carts/alice", method: .get) { response in
        let cart = try decodeCart(response.body)
        #expect(cart.items == ["pear": 1])
      }
      try await client.execute(uri: "/carts/nobody", method: .get) { response in
        #expect(response.status == .ok)
        let cart = try decodeCart(response.body)
        #expect(cart == Cart.State(customer: "nobody"))
      }
      // HEAD wherever GET is: the status and headers, no body.
      try await client.execute(uri: "/carts/alice", method: .head) { response in
        #expect(response.status == .ok)
        #expect(response.headers[.contentType] == "application/json")
        #expect(response.body.readableBytes == 0)
      }
      try await client.execute(uri: "/carts/%ff", method: .head) { response in
        #expect(response.status == .badRequest)
        #expect(response.body.readableBytes == 0)
      }
    }
    await carts.shutdown(gracePeriod: .seconds(1))
  }

  @Test func badInputIsA400WithAnErrorMessage() async throws {
    let carts = makeCarts()
    let app = Application(router: makeRouter(carts: carts))
    try await app.test(.router) { client in
      for body in [#"{"item": "apple", "quantity": 0}"#, "not json", #"{"item": "apple"}"#] {
        try await client.execute(
          uri: "/carts/alice/items",
          method: .post,
          body: ByteBuffer(string: body)
        ) { response in
          #expect(response.status == .badRequest)
          let error = try JSONDecoder().decode(
            [String: String].self,
            from: Data(buffer: response.body)
          )
          #expect(error["error"]?.isEmpty == false)
        }
      }
    }
    #expect(carts.liveCount == 0)
    await carts.shutdown(gracePeriod: .seconds(1))
  }

  @Test func sessionErrorsAre503And409WithJSONBodiesThatNameNoHost() async throws {
    let storage = InMemorySessionStorage<String, Cart.State>()
    let other = Carts(storage: storage, owner: "other-host.internal") {
      Cart.State(customer: $0)
    } reducer: {
      Cart()
    }
    try await other.send(.add(item: "fig", quantity: 1), to: "taken")
    let carts = makeCarts(storage)
    let app = Application(router: makeRouter(carts: carts))
    try await app.test(.router) { client in
      try await client.execute(
        uri: "/carts/taken/items",
        method: .post,
        body: ByteBuffer(string: #"{"item": "apple", "quantity": 1}"#)
      ) { response in
        #expect(response.status == .conflict)
        let message = try errorMessage(response)
        #expect(!message.contains("other-host"))
      }
      storage.failOperations(with: DatabaseDown())
      try await client.execute(uri: "/carts/alice/items", method: .post, body: apple) { response in
        #expect(response.status == .serviceUnavailable)
        #expect(response.headers[.retryAfter] == "1")
        let message = try errorMessage(response)
        #expect(!message.contains("db-7.internal"))
        #expect(!message.contains("password"))
      }
      storage.failOperations(with: nil)
      storage.store(Cart.State(customer: "unreadable"), for: "unreadable")
      storage.makeUnreadable("unreadable")
      try await client.execute(uri: "/carts/unreadable", method: .get) { response in
        #expect(response.status == .serviceUnavailable)
        _ = try errorMessage(response)
      }
      await carts.shutdown(gracePeriod: .seconds(1))
      try await client.execute(uri: "/carts/alice", method: .get) { response in
        #expect(response.status == .serviceUnavailable)
        #expect(response.headers[.retryAfter] == "1")
        _ = try errorMessage(response)
      }
    }
    await other.shutdown(gracePeriod: .seconds(1))
  }
}

private struct DatabaseDown: Error, CustomStringConvertible {
  var description: String { "connection to db-7.internal:5432 refused (password authentication)" }
}

private let apple = ByteBuffer(string: #"{"item": "apple", "quantity": 1}"#)

/// The `error` of a JSON error body; fails the test if the body is not one.
func errorMessage(
  _ response: TestResponse,
  sourceLocation: SourceLocation = #_sourceLocation
) throws -> String {
  #expect(
    response.headers[.contentType]?.hasPrefix("application/json") == true,
    sourceLocation: sourceLocation
  )
  let body = try JSONDecoder().decode([String: String].self, from: Data(buffer: response.body))
  let message = try #require(body["error"], sourceLocation: sourceLocation)
  #expect(!message.isEmpty, sourceLocation: sourceLocation)
  return message
}

/// Bad, huge, malformed and adversarial requests: each gets its status and a JSON error naming
/// what was wrong, and the server goes on serving.
@Suite(.timeLimit(.minutes(1))) struct HostileRouteTests {
  private func withServer(
    _ storage: InMemorySessionStorage<String, Cart.State> = InMemorySessionStorage(),
    _ body:
      @Sendable (any TestClientProtocol, InMemorySessionStorage<String, Cart.State>) async throws ->
      Void
  ) async throws {
    let carts = makeCarts(storage)
    let app = Application(router: makeRouter(carts: carts))
    try await app.test(.router) { client in
      try await body(client, storage)
      // Whatever came before, the server still serves.
      try await client.execute(uri: "/carts/after/items", method: .post, body: apple) { response in
        #expect(response.status == .ok)
      }
    }
    await carts.shutdown(gracePeriod: .seconds(1))
  }

  @Test func idsOutOfBoundsAre400NotA503() async throws {
    try await withServer { client, storage in
      let long = String(repeating: "k", count: 257)
      let kilobyte = String(repeating: "k", count: 1_100)
      for uri in [
        "/carts/\(long)", "/carts/\(kilobyte)/items", "/carts/\(kilobyte)",
        "/carts/alice/items/\(long)", "/carts/\(long)/events",
      ] {
        for method in [HTTPRequest.Method.get, .post, .delete] {
          try await client.execute(uri: uri, method: method, body: apple) { response in
            // A route that does not exist for this method is a 404; every other answer is a 400.
            #expect(
              [.badRequest, .notFound].contains(response.status),
              "\(method) \(uri.prefix(40))"
            )
            _ = try errorMessage(response)
          }
        }
      }
      try await client.execute(
        uri: "/carts/alice/items",
        method: .post,
        body: ByteBuffer(string: #"{"item": "\#(long)", "quantity": 1}"#)
      ) { response in
        #expect(response.status == .badRequest)
        let message = try errorMessage(response)
        #expect(message.contains("item"))
      }
      #expect(!storage.hasRow(for: long))
    }
  }

  @Test func idsWithANULAre400SinceNoStorageCanKeepThemAll() async throws {
    try await withServer { client, storage in
      for (uri, method) in [
        ("/carts/a%00b", HTTPRequest.Method.get), ("/carts/a%00b/items", .post),
        ("/carts/a%00b", .delete), ("/carts/alice/items/a%00b", .delete),
        ("/carts/a%00b/events", .get),
      ] {
        try await client.execute(uri: uri, method: method, body: apple) { response in
          #expect(response.status == .badRequest, "\(method) \(uri)")
          let message = try errorMessage(response)
          #expect(message.contains("must not contain a NUL character"))
        }
      }
      try await client.execute(
        uri: "/carts/alice/items",
        method: .post,
        body: ByteBuffer(string: #"{"item": "a\u0000b", "quantity": 1}"#)
      ) { response in
        #expect(response.status == .badRequest)
        let message = try errorMessage(response)
        #expect(message == "the item must not contain a NUL character")
      }
      #expect(!storage.hasRow(for: "a\0b"))
      #expect(!storage.hasRow(for: "alice"))
    }
  }

  @Test func pathSegmentsArePercentDecoded() async throws {
    try await withServer { client, _ in
      try await client.execute(
        uri: "/carts/alice/items",
        method: .post,
        body: ByteBuffer(string: #"{"item": "a b/c", "quantity": 2}"#)
      ) { response in
        #expect(response.status == .ok)
      }
      // `%61lice` is alice; `a%20b%2Fc` is the item "a b/c".
      try await client.execute(uri: "/carts/%61lice/items/a%20b%2Fc", method: .delete) { response in
        #expect(response.status == .ok)
        let decoded = try decodeCart(response.body)
        #expect(decoded.items.isEmpty)
      }
      try await client.execute(uri: "/carts/%61lice", method: .get) { response in
        let decoded = try decodeCart(response.body)
        #expect(decoded.customer == "alice")
      }
      for bad in ["/carts/%ZZ", "/carts/%FF%FE", "/carts/%", "/carts/%2"] {
        try await client.execute(uri: bad, method: .get) { response in
          #expect(response.status == .badRequest, "\(bad)")
          let message = try errorMessage(response)
          #expect(message.contains("percent"))
        }
      }
    }
  }

  @Test func aNumberItsFieldCannotHoldIsNamedNotCalledInvalidJSON() async throws {
    try await withServer { client, _ in
      for quantity in ["1.5", "99999999999999999999999"] {
        try await client.execute(
          uri: "/carts/alice/items",
          method: .post,
          body: ByteBuffer(string: #"{"item": "apple", "quantity": \#(quantity)}"#)
        ) { response in
          #expect(response.status == .badRequest)
          let message = try errorMessage(response)
          #expect(message.contains("'quantity'"), "\(message)")
          #expect(!message.contains("not valid JSON"), "\(message)")
        }
      }
      try await client.execute(
        uri: "/carts/alice/items",
        method: .post,
        body: ByteBuffer(string: "{")
      ) {
        response in
        let message = try errorMessage(response)
        #expect(message.contains("not valid JSON"), "\(message)")
      }
    }
  }

  @Test func malformedBodiesAre400AndAHugeOneIsA413() async throws {
    try await withServer { client, _ in
      let bodies = [
        "", "not json", "[]", "null", #"{"item": "apple"}"#, #"{"quantity": 1}"#,
        #"{"item": 7, "quantity": 1}"#, #"{"item": "apple", "quantity": "1"}"#,
        #"{"item": "apple", "quantity": 1.5}"#, #"{"item": "apple", "quantity": 0}"#,
        #"{"item": "apple", "quantity": -3}"#, #"{"item": "", "quantity": 1}"#,
        #"{"item": "apple", "quantity": 9223372036854775807}"#,
        #"{"item": "apple", "quantity": 99999999999999999999999}"#,
        String(repeating: "[", count: 10_000),
      ]
      for body in bodies {
        try await client.execute(
          uri: "/carts/alice/items",
          method: .post,
          body: ByteBuffer(string: body)
        ) { response in
          #expect(response.status == .badRequest, "\(body.prefix(40))")
          _ = try errorMessage(response)
        }
      }
      try await client.execute(
        uri: "/carts/alice/items",
        method: .post,
        body: ByteBuffer(bytes: [0xFF, 0xFE, 0x00, 0x7B])
      ) { response in
        #expect(response.status == .badRequest)
        _ = try errorMessage(response)
      }
      let huge =
        #"{"item": "apple", "quantity": 1, "pad": ""# + String(repeating: "x", count: 70_000)
        + #""}"#
      try await client.execute(
        uri: "/carts/alice/items",
        method: .post,
        body: ByteBuffer(string: huge)
      ) { response in
        #expect(response.status == .contentTooLarge)
        _ = try errorMessage(response)
      }
      try await client.execute(uri: "/nowhere", method: .get) { response in
        #expect(response.status == .notFound)
        _ = try errorMessage(response)
      }
    }
  }

  @Test func addsPastTheCartsLimitsAre400AndChangeNothing() async throws {
    try await withServer { client, _ in
      let most = #"{"item": "apple", "quantity": \#(Cart.maximumQuantity)}"#
      try await client.execute(
        uri: "/carts/alice/items",
        method: .post,
        body: ByteBuffer(string: most)
      ) {
        response in
        #expect(response.status == .ok)
      }
      try await client.execute(uri: "/carts/alice/items", method: .post, body: apple) { response in
        #expect(response.status == .badRequest)
        let message = try errorMessage(response)
        #expect(message.contains("at most"))
      }
      try await client.execute(uri: "/carts/alice", method: .get) { response in
        let cart = try decodeCart(response.body)
        #expect(cart.items == ["apple": Cart.maximumQuantity])
        #expect(cart.version == 1)
      }
    }
  }

  @Test func aStoredCartThatWouldOverflowIsServedAndItsAddIsA400() async throws {
    let storage = InMemorySessionStorage<String, Cart.State>()
    // Saved by an earlier version that had no limits.
    storage.store(
      Cart.State(customer: "poison", items: ["apple": .max], version: .max),
      for: "poison"
    )
    storage.store(Cart.State(customer: "big", items: ["apple": .max], version: 3), for: "big")
    try await withServer(storage) { client, _ in
      for customer in ["poison", "big"] {
        try await client.execute(uri: "/carts/\(customer)/items", method: .post, body: apple) {
          response in
          #expect(response.status == .badRequest)
          _ = try errorMessage(response)
        }
        try await client.execute(uri: "/carts/\(customer)", method: .get) { response in
          #expect(response.status == .ok)
          let decoded = try decodeCart(response.body)
          #expect(decoded.items["apple"] == .max)
        }
      }
      try await client.execute(uri: "/carts/big/items/apple", method: .delete) { response in
        #expect(response.status == .ok)
        let decoded = try decodeCart(response.body)
        #expect(decoded.items.isEmpty)
      }
    }
  }

  @Test func aRetryWithTheSameIdempotencyKeyAppliesNothingAgain() async throws {
    try await withServer { client, storage in
      for _ in 0..<3 {
        try await client.execute(
          uri: "/carts/alice/items",
          method: .post,
          headers: try idempotencyKey("req-1"),
          body: apple
        ) { response in
          #expect(response.status == .ok)
          let cart = try decodeCart(response.body)
          #expect(cart.items == ["apple": 1])
          #expect(cart.version == 1)
        }
      }
      for _ in 0..<2 {
        try await client.execute(
          uri: "/carts/alice/items/apple",
          method: .delete,
          headers: try idempotencyKey("req-2")
        ) { response in
          #expect(response.status == .ok)
          let decoded = try decodeCart(response.body)
          #expect(decoded.version == 2)
        }
      }
      #expect(storage.storedIdempotency(for: "alice").contains("req-1"))
      #expect(storage.storedIdempotency(for: "alice").contains("req-2"))
      for bad in ["", String(repeating: "k", count: 257)] {
        try await client.execute(
          uri: "/carts/alice/items",
          method: .post,
          headers: try idempotencyKey(bad),
          body: apple
        ) { response in
          #expect(response.status == .badRequest)
          let message = try errorMessage(response)
          #expect(message.contains("Idempotency-Key"))
        }
      }
      try await client.execute(
        uri: "/carts/alice/items",
        method: .post,
        headers: try idempotencyKey("req-3", "req-4"),
        body: apple
      ) { response in
        #expect(response.status == .badRequest)
        _ = try errorMessage(response)
      }
    }
  }

  @Test func erasingACartAnswers204AndLeavesNothingStored() async throws {
    try await withServer { client, storage in
      try await client.execute(uri: "/carts/alice/items", method: .post, body: apple) { _ in }
      #expect(storage.hasRow(for: "alice"))
      try await client.execute(uri: "/carts/alice", method: .delete) { response in
        #expect(response.status == .noContent)
      }
      #expect(!storage.hasRow(for: "alice"))
      try await client.execute(uri: "/carts/alice", method: .get) { response in
        let decoded = try decodeCart(response.body)
        #expect(decoded == Cart.State(customer: "alice"))
      }
      try await client.execute(uri: "/carts/never-seen", method: .delete) { response in
        #expect(response.status == .noContent)
      }
      // Reads of carts never saved write nothing.
      try await client.execute(uri: "/carts/just-looking", method: .get) { response in
        #expect(response.status == .ok)
      }
      #expect(!storage.hasRow(for: "just-looking"))
      #expect(!storage.hasRow(for: "never-seen"))
    }
  }

  @Test func anEraseTakesAnIdempotencyKeyAsTheOtherWritesDoAndARetryAnswers204Again() async throws {
    try await withServer { client, storage in
      try await client.execute(uri: "/carts/alice/items", method: .post, body: apple) { _ in }
      for _ in 0..<2 {
        try await client.execute(
          uri: "/carts/alice",
          method: .delete,
          headers: try idempotencyKey("erase-1")
        ) { response in
          #expect(response.status == .noContent)
        }
        #expect(!storage.hasRow(for: "alice"))
      }
      try await client.execute(uri: "/carts/bob/items", method: .post, body: apple) { _ in }
      for headers in [
        try idempotencyKey(""), try idempotencyKey(String(repeating: "k", count: 2_000)),
        try idempotencyKey("one", "two"),
      ] {
        try await client.execute(uri: "/carts/bob", method: .delete, headers: headers) {
          response in
          #expect(response.status == .badRequest)
          let message = try errorMessage(response)
          #expect(message.contains("Idempotency-Key"))
        }
      }
      // Refused before it was applied: bob's cart is still there.
      #expect(storage.hasRow(for: "bob"))
    }
  }
}

/// Request headers with an `Idempotency-Key` (once, or as often as `values` has).
func idempotencyKey(_ values: String...) throws -> HTTPFields {
  let name = try #require(HTTPField.Name("Idempotency-Key"))
  return HTTPFields(values.map { HTTPField(name: name, value: $0) })
}

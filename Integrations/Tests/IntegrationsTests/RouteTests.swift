import Foundation
import Hummingbird
import HummingbirdTesting
import NIOCore
import Testing
import Unidirectional

@testable import CartServer

private func makeCarts(_ storage: InMemorySessionStorage<String, Cart.State>? = nil) -> Carts {
  Carts(storage: storage, owner: "test") {
    Cart.State(customer: $0)
  } reducer: {
    Cart()
  }
}

private func decodeCart(_ buffer: ByteBuffer) throws -> Cart.State {
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

  @Test func sessionErrorsAre503And409() async throws {
    let storage = InMemorySessionStorage<String, Cart.State>()
    let other = Carts(storage: storage, owner: "other") {
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
        #expect(String(buffer: response.body).contains("other"))
      }
      await carts.shutdown(gracePeriod: .seconds(1))
      try await client.execute(uri: "/carts/alice", method: .get) { response in
        #expect(response.status == .serviceUnavailable)
        #expect(String(buffer: response.body).contains("alice"))
      }
    }
    await other.shutdown(gracePeriod: .seconds(1))
  }
}

import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import NIOCore
import Testing
import Unidirectional
import UnidirectionalServer

@testable import CartServer

/// Idempotency keys at cart-server's edge: a retry is answered as one, a key reused for another
/// request is a 422, and an answer never carries another request's refusal.
private let apple = ByteBuffer(string: #"{"item": "apple", "quantity": 1}"#)

@Suite(.timeLimit(.minutes(1))) struct IdempotentRouteTests {
  private func withServer(
    _ body:
      @Sendable (any TestClientProtocol, InMemorySessionStorage<String, Cart.State>) async throws ->
      Void
  ) async throws {
    let storage = InMemorySessionStorage<String, Cart.State>()
    let carts = Carts(storage: storage, owner: "test") {
      Cart.State(customer: $0)
    } reducer: {
      Cart()
    }
    try await Application(router: makeRouter(carts: carts)).test(.router) { client in
      try await body(client, storage)
    }
    await carts.shutdown(gracePeriod: .seconds(1))
  }

  @Test func anIdempotencyKeyReusedForAnotherRequestIsA422AndAppliesNothing() async throws {
    try await withServer { client, storage in
      let key = try idempotencyKey("req-1")
      try await client.execute(uri: "/carts/alice/items", method: .post, headers: key, body: apple)
      { response in
        #expect(response.status == .ok)
      }
      let banana = ByteBuffer(string: #"{"item": "banana", "quantity": 1}"#)
      let twoApples = ByteBuffer(string: #"{"item": "apple", "quantity": 2}"#)
      for body in [banana, twoApples] {
        try await client.execute(uri: "/carts/alice/items", method: .post, headers: key, body: body)
        { response in
          #expect(response.status == .unprocessableContent)
          let message = try errorMessage(response)
          #expect(message.contains("Idempotency-Key was used before"))
        }
      }
      try await client.execute(uri: "/carts/alice/items/apple", method: .delete, headers: key) {
        response in
        #expect(response.status == .unprocessableContent)
      }
      // The first request's retry is still answered as one.
      try await client.execute(uri: "/carts/alice/items", method: .post, headers: key, body: apple)
      { response in
        #expect(response.status == .ok)
        let cart = try decodeCart(response.body)
        #expect(cart.version == 1)
      }
      let stored = storage.storedState(for: "alice")
      #expect(stored?.items == ["apple": 1])
      #expect(stored?.version == 1)
    }
  }

  @Test func aRetryOfAnAppliedAddIsA200EvenRightAfterAnotherRequestWasRefused() async throws {
    try await withServer { client, storage in
      let full = ByteBuffer(string: #"{"item": "apple", "quantity": 1000000}"#)
      let pear = ByteBuffer(string: #"{"item": "pear", "quantity": 1}"#)
      try await client.execute(uri: "/carts/alice/items", method: .post, body: full) {
        #expect($0.status == .ok)
      }
      let key = try idempotencyKey("pear-1")
      try await client.execute(uri: "/carts/alice/items", method: .post, headers: key, body: pear) {
        #expect($0.status == .ok)
      }
      // Another request's add is refused: the cart is full of apples.
      try await client.execute(uri: "/carts/alice/items", method: .post, body: apple) { response in
        #expect(response.status == .badRequest)
        let message = try errorMessage(response)
        #expect(message.contains("at most 1000000"))
      }
      // The retry of the applied add reads the cart after that refusal, and is still a 200.
      try await client.execute(uri: "/carts/alice/items", method: .post, headers: key, body: pear) {
        response in
        #expect(response.status == .ok)
        let cart = try decodeCart(response.body)
        #expect(cart.items == ["apple": 1_000_000, "pear": 1])
        #expect(cart.version == 2)
      }
      // A refused add's retry is answered as its first answer was, each time: not applied.
      let refusedKey = try idempotencyKey("apple-2")
      for _ in 0..<3 {
        try await client.execute(
          uri: "/carts/alice/items",
          method: .post,
          headers: refusedKey,
          body: apple
        ) { response in
          #expect(response.status == .badRequest)
          let message = try errorMessage(response)
          #expect(message.contains("at most 1000000 of one item; it has 1000000"))
        }
      }
      #expect(storage.storedState(for: "alice")?.version == 2)
    }
  }

  @Test func aRetryOfARefusedAddIsTheSame400AfterARestartAndOnceTheCartCouldTakeIt() async throws {
    let storage = InMemorySessionStorage<String, Cart.State>()
    let full = ByteBuffer(string: #"{"item": "apple", "quantity": 1000000}"#)
    let key = try idempotencyKey("one-more-apple")
    for run in 0..<2 {
      let carts = Carts(storage: storage, owner: "run-\(run)") {
        Cart.State(customer: $0)
      } reducer: {
        Cart()
      }
      try await Application(router: makeRouter(carts: carts)).test(.router) { client in
        /// The keyed add, refused when the cart was full; each of its retries is that refusal.
        func refusedAdd() async throws {
          try await client.execute(
            uri: "/carts/alice/items",
            method: .post,
            headers: key,
            body: apple
          ) { response in
            #expect(response.status == .badRequest)
            let message = try errorMessage(response)
            #expect(message.contains("it has 1000000 of this one"))
          }
        }
        if run == 0 {
          try await client.execute(uri: "/carts/alice/items", method: .post, body: full) {
            #expect($0.status == .ok)
          }
        }
        try await refusedAdd()
        if run == 1 {
          // Room for it now; its retry is still the refusal it was, and a new request applies.
          try await client.execute(uri: "/carts/alice/items/apple", method: .delete) {
            #expect($0.status == .ok)
          }
          try await refusedAdd()
          try await client.execute(uri: "/carts/alice/items", method: .post, body: apple) {
            response in
            #expect(response.status == .ok)
            // NB: the body is the cart alone; what it remembers of refusals stays in storage.
            let body = String(buffer: response.body)
            #expect(!body.contains("refusals"))
            let cart = try decodeCart(response.body)
            #expect(cart.items == ["apple": 1])
          }
        }
      }
      await carts.shutdown(gracePeriod: .seconds(1))
    }
    let stored = storage.storedState(for: "alice")
    #expect(stored?.version == 3)
    #expect(stored?.refusals.count == 1)
  }
}

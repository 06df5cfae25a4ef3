import AsyncHTTPClient
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import NIOCore
import Testing
import Unidirectional
import UnidirectionalServer

@testable import CartServer

/// Two instances in one process on one in-memory storage, its leases on a test clock: A serves on
/// a real loopback port; B forwards to it.
private struct TwoInstances {
  let time = TestClock()
  let storage: InMemorySessionStorage<String, Cart.State>
  let a: Carts
  let b: Carts
  let client: HTTPClient

  init() {
    self.storage = InMemorySessionStorage(clock: self.time, leaseDuration: .seconds(10))
    self.a = Carts(storage: self.storage, owner: "node-a") {
      Cart.State(customer: $0)
    } reducer: {
      Cart()
    }
    self.b = Carts(storage: self.storage, owner: "node-b") {
      Cart.State(customer: $0)
    } reducer: {
      Cart()
    }
    var configuration = HTTPClient.Configuration()
    configuration.timeout.connect = .seconds(1)
    self.client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
  }

  /// Serves A on a loopback port of its own, its address advertised, for `body`.
  func servingA(_ body: @Sendable (any TestClientProtocol) async throws -> Void) async throws {
    let a = self.a
    try await Application(router: makeRouter(carts: a)).test(.live) { clientA in
      a.advertisedAddress = "http://127.0.0.1:\(try #require(clientA.port))"
      try await body(clientA)
    }
  }

  /// B's server, which forwards to the owner, waiting for it at most `timeout`.
  func forwardingB(timeout: Duration = .seconds(30)) -> some ApplicationProtocol {
    Application(
      router: makeRouter(carts: self.b, forwarding: self.client, forwardingTimeout: timeout)
    )
  }

  func shutdown() async {
    await self.a.shutdown(gracePeriod: .seconds(1))
    await self.b.shutdown(gracePeriod: .seconds(1))
    try? await self.client.shutdown()
  }
}

private let apple = ByteBuffer(string: #"{"item": "apple", "quantity": 1}"#)

private func cart(_ response: TestResponse) throws -> Cart.State {
  try JSONDecoder().decode(Cart.State.self, from: Data(buffer: response.body))
}

private func forwardedHeaders() throws -> HTTPFields {
  let name = try #require(HTTPField.Name(ForwardingMiddleware<BasicRequestContext>.forwardedHeader))
  return HTTPFields([HTTPField(name: name, value: "http://127.0.0.1:1")])
}

@Suite(.serialized, .timeLimit(.minutes(1))) struct ForwardingTests {
  @Test func aRequestForAnotherInstancesSessionIsForwardedOnceAndAnsweredByTheOwner() async throws {
    let instances = TwoInstances()
    let appB = instances.forwardingB()
    try await instances.servingA { clientA in
      try await clientA.execute(uri: "/carts/alice/items", method: .post, body: apple) { response in
        #expect(response.status == .ok)
      }
      try await appB.test(.router) { clientB in
        // Through B, answered by A: B activates nothing.
        try await clientB.execute(uri: "/carts/alice/items", method: .post, body: apple) {
          response in
          #expect(response.status == .ok)
          let answered = try cart(response)
          #expect(answered.items == ["apple": 2])
        }
        try await clientB.execute(uri: "/carts/alice", method: .get) { response in
          let answered = try cart(response)
          #expect(answered.version == 2)
        }
        #expect(instances.b.liveCount == 0)
        #expect(instances.storage.owner(of: "alice") == "node-a")
        // A request already forwarded is never forwarded again: 409.
        try await clientB.execute(
          uri: "/carts/alice/items",
          method: .post,
          headers: try forwardedHeaders(),
          body: apple
        ) { response in
          #expect(response.status == .conflict)
          let body = String(buffer: response.body)
          #expect(body.contains("error"))
          #expect(!body.contains("node-a"))
        }
      }
    }
    await instances.shutdown()
  }

  @Test func erasingAnotherInstancesCartIsForwardedToItsOwner() async throws {
    let instances = TwoInstances()
    let appB = instances.forwardingB()
    try await instances.servingA { clientA in
      try await clientA.execute(uri: "/carts/alice/items", method: .post, body: apple) { response in
        #expect(response.status == .ok)
      }
      try await appB.test(.router) { clientB in
        // Through B, erased by A, the owner: 204, and nothing of the cart is left.
        try await clientB.execute(uri: "/carts/alice", method: .delete) { response in
          #expect(response.status == .noContent)
        }
        #expect(!instances.storage.hasRow(for: "alice"))
        #expect(instances.a.liveCount == 0)
        #expect(instances.b.liveCount == 0)
        try await clientB.execute(uri: "/carts/alice", method: .get) { response in
          let answered = try cart(response)
          #expect(answered.items.isEmpty)
        }
      }
    }
    await instances.shutdown()
  }

  @Test func anUnreachableOwnerIsA503UntilItsLeaseExpiresThenTheKeyIsTakenOver() async throws {
    let instances = TwoInstances()
    try await instances.servingA { clientA in
      try await clientA.execute(uri: "/carts/alice/items", method: .post, body: apple) { _ in }
    }
    // A's server is gone; its lease is not.
    await instances.time.advance(by: .seconds(4))
    let appB = instances.forwardingB()
    try await appB.test(.router) { clientB in
      for _ in 0..<2 {
        try await clientB.execute(uri: "/carts/alice/items", method: .post, body: apple) {
          response in
          #expect(response.status == .serviceUnavailable)
          // NB: the 6 s A's lease had left, less the time the failed connection took.
          #expect(["5", "6"].contains(response.headers[.retryAfter]))
          #expect(String(buffer: response.body).contains("does not answer"))
        }
      }
      await instances.time.advance(by: .seconds(7))
      try await clientB.execute(uri: "/carts/alice/items", method: .post, body: apple) { response in
        #expect(response.status == .ok)
        let answered = try cart(response)
        #expect(answered.items == ["apple": 2])
      }
      #expect(instances.storage.owner(of: "alice") == "node-b")
    }
    await instances.shutdown()
  }

  @Test func anOwnerThatTakesConnectionsButNeverAnswersIsGivenUpOnWhenItsLeaseRunsOut()
    async throws
  {
    let instances = TwoInstances()
    // NB: a timeout past the suite's time limit: only the owner's lease can end the wait.
    let appB = instances.forwardingB(timeout: .seconds(120))
    try await instances.servingA { clientA in
      // A is reached through a proxy, which goes silent as a paused process does: the kernel
      // still takes the connection and the request, and nothing answers.
      let proxy = try await SilenceableProxy(to: try #require(clientA.port))
      instances.a.advertisedAddress = "http://127.0.0.1:\(proxy.port)"
      try await clientA.execute(uri: "/carts/alice/items", method: .post, body: apple) { _ in }
      await instances.time.advance(by: .milliseconds(8_500))
      proxy.silence()
      try await appB.test(.router) { clientB in
        // A's lease has 1.5 s left: B waits that and a second, not its timeout, and by then
        // the lease has run out (a retry in a second).
        try await clientB.execute(uri: "/carts/alice/items", method: .post, body: apple) {
          response in
          #expect(response.status == .serviceUnavailable)
          #expect(response.headers[.retryAfter] == "1")
        }
        await instances.time.advance(by: .seconds(2))
        try await clientB.execute(uri: "/carts/alice/items", method: .post, body: apple) {
          response in
          #expect(response.status == .ok)
          let answered = try cart(response)
          #expect(answered.items == ["apple": 2])
        }
        #expect(instances.storage.owner(of: "alice") == "node-b")
      }
      await proxy.close()
    }
    await instances.shutdown()
  }

  @Test func anOwnerWhoseLeaseWasTakenDuringAForwardIsFencedAndAnswers409() async throws {
    let instances = TwoInstances()
    try await instances.a.send(.add(item: "apple", quantity: 1), to: "alice")
    // A's lease expires while a request forwarded to it is on its way; B takes the key.
    await instances.time.advance(by: .seconds(11))
    try await instances.b.send(.add(item: "pear", quantity: 1), to: "alice")
    let appA = Application(router: makeRouter(carts: instances.a))
    try await appA.test(.router) { clientA in
      try await clientA.execute(
        uri: "/carts/alice/items",
        method: .post,
        headers: try forwardedHeaders(),
        body: apple
      ) { response in
        #expect(response.status == .conflict)
      }
    }
    // A's store reduced it, but its save carried a stale token: storage holds B's state.
    #expect(instances.storage.storedState(for: "alice")?.items == ["apple": 1, "pear": 1])
    await instances.shutdown()
  }

  @Test func aNonOwnerStreamsTheOwnersEvents() async throws {
    let instances = TwoInstances()
    let appB = instances.forwardingB()
    try await instances.servingA { clientA in
      try await clientA.execute(uri: "/carts/alice/items", method: .post, body: apple) { _ in }
      try await appB.test(.live) { clientB in
        let portB = try #require(clientB.port)
        let response = try await instances.client.execute(
          HTTPClientRequest(url: "http://127.0.0.1:\(portB)/carts/alice/events"),
          timeout: .seconds(10)
        )
        #expect(response.status == .ok)
        #expect(response.headers.first(name: "content-type") == "text/event-stream")
        // A change made at the owner arrives through B's stream.
        var seen = ""
        for try await chunk in response.body {
          seen += String(buffer: chunk)
          if seen.contains(#""apple":1"#), !seen.contains(#""pear":1"#) {
            try await clientA.execute(
              uri: "/carts/alice/items",
              method: .post,
              body: ByteBuffer(string: #"{"item": "pear", "quantity": 1}"#)
            ) { #expect($0.status == .ok) }
          }
          if seen.contains(#""pear":1"#) { break }
        }
        #expect(seen.hasPrefix("data: "))
        #expect(seen.contains(#""pear":1"#))
        #expect(instances.b.liveCount == 0)
      }
    }
    await instances.shutdown()
  }

  @Test func aKeyWhoseGoneOwnerRecordedThisInstancesAddressIsA503UntilItsLeaseRunsOut()
    async throws
  {
    // A ran at this address and is gone; B, restarted there under another name, is asked for
    // A's key directly (a balancer's choice) or by a forward meant for A: nothing to forward to,
    // and A is not coming back.
    let instances = TwoInstances()
    instances.a.advertisedAddress = "http://127.0.0.1:18399"
    instances.b.advertisedAddress = "http://127.0.0.1:18399"
    try await instances.a.send(.add(item: "apple", quantity: 1), to: "alice")
    await instances.time.advance(by: .seconds(4))
    try await instances.forwardingB().test(.router) { clientB in
      for headers in [HTTPFields(), try forwardedHeaders()] {
        try await clientB.execute(
          uri: "/carts/alice/items",
          method: .post,
          headers: headers,
          body: apple
        ) { response in
          #expect(response.status == .serviceUnavailable)
          #expect(response.headers[.retryAfter] == "6")
          #expect(String(buffer: response.body).contains("does not answer"))
          #expect(!String(buffer: response.body).contains("node-a"))
        }
      }
      await instances.time.advance(by: .seconds(7))
      try await clientB.execute(uri: "/carts/alice/items", method: .post, body: apple) {
        response in
        #expect(response.status == .ok)
      }
    }
    await instances.shutdown()
  }

  @Test func anInstanceWithNoAddressForItsOwnerAnswers409() async throws {
    let instances = TwoInstances()
    try await instances.a.send(.add(item: "apple", quantity: 1), to: "alice")
    let appB = instances.forwardingB()
    try await appB.test(.router) { clientB in
      try await clientB.execute(uri: "/carts/alice", method: .get) { response in
        #expect(response.status == .conflict)
      }
    }
    await instances.shutdown()
  }
}

import Foundation
import Testing
import Unidirectional

@testable import CartServer

/// The example's cart: what it remembers of its refusals, and how it is stored.
@Suite struct CartTests {
  @Test func aCartRemembersItsLatestRefusalsAndNoMore() {
    var cart = Cart.State(customer: "alice", items: ["apple": Cart.maximumQuantity], version: 1)
    let reducer = Cart()
    for request in UInt64(1)...UInt64(Cart.rememberedRefusals + 8) {
      _ = reducer.reduce(into: &cart, action: .add(item: "apple", quantity: 1, request: request))
    }
    #expect(cart.refusals.count == Cart.rememberedRefusals)
    #expect(cart.refusals.first?.request == 9)
    #expect(cart.refusal(of: 8) == nil)
    #expect(
      cart.refusal(of: UInt64(Cart.rememberedRefusals + 8))?.reason.contains("at most") == true
    )
    #expect(cart.version == 1)
    // An applied action leaves them as they are.
    _ = reducer.reduce(into: &cart, action: .remove(item: "apple", request: 100))
    #expect(cart.refusals.count == Cart.rememberedRefusals)
    #expect(cart.refusal(of: 100) == nil)
    #expect(cart.version == 2)
  }

  @Test func aCartWithNoRefusalsIsStoredAsAnEarlierVersionStoredItAndReadsItsForm() throws {
    let earlier = #"{"customer":"alice","items":{"apple":2},"version":7}"#
    let read = try JSONDecoder().decode(Cart.State.self, from: Data(earlier.utf8))
    #expect(read == Cart.State(customer: "alice", items: ["apple": 2], version: 7))
    let encoder = JSONEncoder()
    encoder.outputFormatting = .sortedKeys
    #expect(String(decoding: try encoder.encode(read), as: UTF8.self) == earlier)

    var refused = read
    _ = Cart().reduce(into: &refused, action: .add(item: "pear", quantity: 0, request: .max))
    let stored = try encoder.encode(refused)
    let back = try JSONDecoder().decode(Cart.State.self, from: stored)
    #expect(back == refused)
    #expect(back.refusal(of: .max)?.reason == "quantity must be at least 1, not 0")
  }

  @Test func aRequestWithAnIdempotencyKeyIsNamedByItInEveryProcess() {
    // FNV-1a of "a", a value of the algorithm's own: the same in every process and build.
    #expect(requestID("a") == 0xaf63_dc4c_8601_ec8c)
    #expect(requestID("retry-1") == requestID("retry-1"))
    #expect(requestID("retry-1") != requestID("retry-2"))
    #expect(requestID(nil) != 0)
  }
}

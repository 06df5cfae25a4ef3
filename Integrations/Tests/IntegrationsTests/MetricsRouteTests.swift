import Foundation
import Hummingbird
import HummingbirdTesting
import NIOCore
import Prometheus
import Testing
import Unidirectional
import UnidirectionalServer

@testable import CartServer

private let apple = ByteBuffer(string: #"{"item": "apple", "quantity": 1}"#)

/// The value of the sample `name` (with its labels, as Prometheus writes them) in a scrape.
func sample(_ name: String, in scrape: String) -> Double? {
  for line in scrape.split(separator: "\n") where line.hasPrefix(name + " ") {
    return Double(line.dropFirst(name.count + 1))
  }
  return nil
}

/// The count of requests to `route` (its pattern) by `method` that got `status`, in a scrape.
func requestCount(_ route: String, _ method: String, _ status: Int, in scrape: String) -> Double? {
  sample(
    #"http_server_requests_total{http_route="\#(route)",http_request_method="\#(method)","#
      + #"http_response_status_code="\#(status)"}"#,
    in: scrape
  )
}

@Suite(.timeLimit(.minutes(1))) struct MetricsRouteTests {
  @Test func metricsAreServedInPrometheusTextWithTheCountsOfWhatHappened() async throws {
    let prometheus = PrometheusCollectorRegistry()
    let factory = PrometheusMetricsFactory(registry: prometheus)
    let carts = Carts(
      storage: InMemorySessionStorage(),
      owner: "test",
      observer: MetricsObserver<Cart.State, Cart.Action>(factory: factory),
      registryObserver: SessionMetrics(factory: factory)
    ) {
      Cart.State(customer: $0)
    } reducer: {
      Cart()
    }
    let app = Application(router: makeRouter(carts: carts, metrics: prometheus))
    try await app.test(.router) { client in
      for customer in ["alice", "bob", "carol"] {
        try await client.execute(uri: "/carts/\(customer)/items", method: .post, body: apple) {
          #expect($0.status == .ok)
        }
      }
      for _ in 0..<2 {
        try await client.execute(
          uri: "/carts/alice/items",
          method: .post,
          headers: try idempotencyKey("once"),
          body: apple
        ) { #expect($0.status == .ok) }
      }
      try await client.execute(uri: "/carts/bob", method: .delete) {
        #expect($0.status == .noContent)
      }
      try await client.execute(uri: "/metrics", method: .get) { response in
        #expect(response.status == .ok)
        #expect(response.headers[.contentType]?.hasPrefix("text/plain") == true)
        let scrape = String(buffer: response.body)
        #expect(sample("unidirectional_sessions_live", in: scrape) == 2)
        #expect(sample("unidirectional_session_activations_total", in: scrape) == 3)
        #expect(
          sample(#"unidirectional_session_passivations_total{reason="erased"}"#, in: scrape) == 1
        )
        #expect(sample("unidirectional_actions_total", in: scrape) == 4)
        #expect(sample("unidirectional_idempotent_replays_total", in: scrape) == 1)
        #expect(sample("unidirectional_storage_failures_total", in: scrape) == 0)
        #expect(scrape.contains("unidirectional_storage_save_seconds"))
      }
      // Each request counts under the status its client got: a `SessionError` as its 503, a
      // reused idempotency key as its 422, not as the 500 a thrown error would be.
      try await client.execute(
        uri: "/carts/alice/items",
        method: .post,
        headers: try idempotencyKey("once"),
        body: ByteBuffer(string: #"{"item": "pear", "quantity": 1}"#)
      ) { #expect($0.status == .unprocessableContent) }
      await carts.shutdown(gracePeriod: .seconds(1))
      try await client.execute(uri: "/carts/alice/items", method: .post, body: apple) {
        #expect($0.status == .serviceUnavailable)
      }
      try await client.execute(uri: "/metrics", method: .get) { response in
        let scrape = String(buffer: response.body)
        #expect(requestCount("/carts/{customer}/items", "POST", 200, in: scrape) == 5)
        #expect(requestCount("/carts/{customer}/items", "POST", 422, in: scrape) == 1)
        #expect(requestCount("/carts/{customer}/items", "POST", 503, in: scrape) == 1)
        #expect(requestCount("/carts/{customer}/items", "POST", 500, in: scrape) == nil)
        #expect(requestCount("/carts/{customer}", "DELETE", 204, in: scrape) == 1)
      }
    }
  }
}

import AsyncHTTPClient
import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import Prometheus
import ServiceLifecycle
import Unidirectional
import UnidirectionalServer

/// `POST /carts/{customer}/items`'s body.
struct AddItem: Decodable {
  var item: String
  var quantity: Int

  private enum CodingKeys: String, CodingKey { case item, quantity }

  init(from decoder: any Decoder) throws {
    let container = try decoder.container(keyedBy: CodingKeys.self)
    self.item = try container.decode(String.self, forKey: .item)
    do {
      self.quantity = try container.decode(Int.self, forKey: .quantity)
    } catch let error as DecodingError {
      throw error
    } catch {
      // NB: Foundation's decoder throws an error of its own for a number that does not fit `Int`
      // (1.5, 1e30), which its top level reports as data that is not JSON at all, with no coding
      // path; said here as what it is.
      throw DecodingError.dataCorruptedError(
        forKey: .quantity,
        in: container,
        debugDescription: "not a whole number that fits in 64 bits"
      )
    }
  }
}

/// The longest customer, item or idempotency key taken, in UTF-8 bytes (after percent-decoding).
let maximumIdentifierLength = 256
/// The largest request body taken.
let maximumBodySize = 64 * 1024

/// The routes of the cart server over a registry; with `forwarding`, a request for a cart that
/// another instance owns is forwarded to it.
///
/// Every error is a JSON body `{"error": "..."}` naming what was wrong with the request, never a
/// host, path or database message (``JSONErrorMiddleware`` logs those with the request's id).
func makeRouter(
  carts: Carts,
  forwarding: HTTPClient? = nil,
  forwardingTimeout: Duration = .seconds(30),
  metrics: PrometheusCollectorRegistry? = nil
) -> Router<BasicRequestContext> {
  // NB: HEAD is answered wherever GET is, as HTTP asks of a server (balancers' health checks
  // use it); Hummingbird routes it only when told to.
  let router = Router(options: .autoGenerateHeadEndpoints)
  if let metrics {
    // NB: outside the error middleware, so it counts each request under the status its client
    // got (a `SessionError` it sees thrown would count as a 500, not the 503 answered).
    router.add(middleware: RequestCounter(factory: PrometheusMetricsFactory(registry: metrics)))
  }
  router.add(middleware: JSONErrorMiddleware())
  if let metrics {
    router.get("/metrics") { _, _ -> Response in
      Response(
        status: .ok,
        headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8"],
        body: ResponseBody(byteBuffer: ByteBuffer(bytes: metrics.emitToBuffer()))
      )
    }
  }
  if let forwarding {
    router.add(
      middleware: ForwardingMiddleware(
        registry: carts,
        client: forwarding,
        timeout: forwardingTimeout
      )
    )
  }
  router.get("/health") { _, _ in "ok" }
  router.post("/carts/:customer/items") { request, context -> Response in
    let customer = try identifier(context, "customer")
    let idempotencyKey = try idempotencyKey(of: request)
    try request.refuseDeclaredBody(over: maximumBodySize)
    let buffer = try await request.body.collect(upTo: maximumBodySize)
    let add: AddItem
    do {
      add = try JSONDecoder().decode(AddItem.self, from: Data(buffer: buffer))
    } catch {
      throw HTTPError(
        .badRequest,
        message: #"the body must be JSON {"item": String, "quantity": Int}: \#(describing(error))"#
      )
    }
    try check(add.item, "item")
    guard add.quantity >= 1, add.quantity <= Cart.maximumQuantity else {
      throw HTTPError(
        .badRequest,
        message: "quantity must be from 1 to \(Cart.maximumQuantity), not \(add.quantity)"
      )
    }
    let request = requestID(idempotencyKey)
    return try await apply(
      .add(item: add.item, quantity: add.quantity, request: request),
      request,
      to: customer,
      idempotencyKey,
      carts,
      context
    )
  }
  router.delete("/carts/:customer/items/:item") { request, context -> Response in
    let customer = try identifier(context, "customer")
    let item = try identifier(context, "item")
    let idempotencyKey = try idempotencyKey(of: request)
    let request = requestID(idempotencyKey)
    return try await apply(
      .remove(item: item, request: request),
      request,
      to: customer,
      idempotencyKey,
      carts,
      context
    )
  }
  router.get("/carts/:customer") { _, context -> Response in
    let customer = try identifier(context, "customer")
    return jsonResponse(.ok, CartBody(try await carts.state(of: customer)))
  }
  router.delete("/carts/:customer") { request, context -> Response in
    let customer = try identifier(context, "customer")
    // NB: checked as on every write, but not kept: an erase leaves no row to keep it in (nothing
    // of the cart may remain), and erasing again is what its retry asks for.
    _ = try idempotencyKey(of: request)
    try await carts.erase(customer)
    return Response(status: .noContent)
  }
  router.get("/carts/:customer/events") { _, context -> Response in
    let customer = try identifier(context, "customer")
    let store = try await carts.activatedStore(for: customer)
    return Response(
      status: .ok,
      headers: [.contentType: "text/event-stream", .cacheControl: "no-cache"],
      body: ResponseBody { writer in
        try await streamEvents(of: customer, from: store, carts: carts, to: &writer)
      }
    )
  }
  return router
}

/// Sends `action` (at most once per idempotency key, when the request has one) and answers the
/// cart as it is right after it: 200, or 400 when the cart refused it.
///
/// `request` is the number `action` carries: a refusal is this request's only if it names it (a
/// retry of an add already applied reads the cart as it is, which may hold another request's
/// refusal). A retry of a refused request is not reduced again, and finds its first answer's
/// refusal in the cart under the same number. The session's log lines carry the request's id.
private func apply(
  _ action: Cart.Action,
  _ request: UInt64,
  to customer: String,
  _ idempotencyKey: String?,
  _ carts: Carts,
  _ context: BasicRequestContext
) async throws -> Response {
  let requestID = context.logger[metadataKey: "hb.request.id"]
  let cart = try await withLogMetadata(requestID.map { ["hb.request.id": $0] } ?? [:]) {
    if let idempotencyKey {
      // NB: with the request's fingerprint, so a key reused for another request is a 422, not a
      // retry answered in silence without applying it.
      try await carts.send(
        action,
        to: customer,
        idempotencyKey: idempotencyKey,
        fingerprint: fingerprint(of: action),
        reading: { $0 }
      )
    } else {
      try await carts.send(action, to: customer, reading: { $0 })
    }
  }
  if let refusal = cart.refusal(of: request) {
    throw HTTPError(.badRequest, message: refusal.reason)
  }
  return jsonResponse(.ok, CartBody(cart))
}

/// What a request asks of a cart, for telling a retry from another request under the same
/// `Idempotency-Key`: the action and its decoded parameters (a key is scoped to its cart).
func fingerprint(of action: Cart.Action) -> String {
  switch action {
  case .add(let item, let quantity, _): "add\u{0}\(item)\u{0}\(quantity)"
  case .remove(let item, _): "remove\u{0}\(item)"
  }
}

/// A number naming one request's action, never 0 (an action no request sent): a digest of its
/// idempotency key, so its retries name the same request; random without one.
func requestID(_ idempotencyKey: String?) -> UInt64 {
  guard let idempotencyKey else { return UInt64.random(in: 1...UInt64.max) }
  // NB: FNV-1a, not `hashValue`: the number is stored, and must be the same in every process.
  var digest: UInt64 = 0xcbf2_9ce4_8422_2325
  for byte in idempotencyKey.utf8 {
    digest = (digest ^ UInt64(byte)) &* 0x0000_0100_0000_01b3
  }
  return max(digest, 1)
}

/// A cart as the routes answer it: its customer, items and version (what it remembers of its
/// refusals stays in storage).
struct CartBody: Encodable, Equatable {
  var customer: String
  var items: [String: Int]
  var version: Int

  init(_ cart: Cart.State) {
    self.customer = cart.customer
    self.items = cart.items
    self.version = cart.version
  }
}

/// Writes `customer`'s cart as it is, then after each change, until the server shuts down.
///
/// The stream follows the cart from one store to the next: a cart that passivates while watched
/// (idle, or pushed out by capacity) or is erased is activated again, and the stream goes on with
/// what changed meanwhile, if anything. It ends on graceful shutdown (before the server waits for
/// open connections: an endless stream would hold the shutdown), or when the cart cannot be
/// activated here (another instance owns it now: a client that reconnects is forwarded there).
private func streamEvents(
  of customer: String,
  from first: Store<Cart.State, Cart.Action>,
  carts: Carts,
  to writer: inout any ResponseBodyWriter
) async throws {
  var store = first
  var last: CartBody?
  while true {
    for await state in store.states.cancelOnGracefulShutdown() {
      let body = CartBody(state)
      // NB: a store activated again starts with the state the last one ended with.
      guard body != last else { continue }
      last = body
      let json = String(decoding: try JSONEncoder().encode(body), as: UTF8.self)
      try await writer.write(ByteBuffer(string: "data: \(json)\n\n"))
    }
    // NB: a cancelled task's `states` end at once: without the check, this would loop.
    guard !Task.isShuttingDownGracefully, !Task.isCancelled,
      let next = try? await carts.activatedStore(for: customer)
    else { break }
    store = next
  }
  try await writer.finish(nil)
}

/// The path parameter `name`, percent-decoded and checked: 1 to 256 bytes of UTF-8.
private func identifier(_ context: BasicRequestContext, _ name: String) throws -> String {
  let raw = try context.parameters.require(name)
  guard let decoded = raw.removingPercentEncoding else {
    throw HTTPError(.badRequest, message: "the \(name) is not valid percent-encoded UTF-8")
  }
  try check(decoded, name)
  return decoded
}

/// The request's `Idempotency-Key` header, if it has one: 1 to 256 bytes, and only one.
private func idempotencyKey(of request: Request) throws -> String? {
  let keys = request.headers.filter { $0.name.canonicalName == "idempotency-key" }
  guard let key = keys.first?.value else { return nil }
  guard keys.count == 1 else {
    throw HTTPError(
      .badRequest,
      message: "a request takes one Idempotency-Key header, not \(keys.count)"
    )
  }
  try check(key, "Idempotency-Key")
  return key
}

/// An identifier is 1 to 256 bytes of UTF-8 with no NUL (PostgreSQL's text cannot hold one: a
/// customer with a NUL would fail in storage, a server error for a client's mistake).
private func check(_ value: String, _ name: String) throws {
  let length = value.utf8.count
  guard length >= 1, length <= maximumIdentifierLength else {
    throw HTTPError(
      .badRequest,
      message: "the \(name) must be 1 to \(maximumIdentifierLength) bytes of UTF-8, not \(length)"
    )
  }
  guard !value.utf8.contains(0) else {
    throw HTTPError(.badRequest, message: "the \(name) must not contain a NUL character")
  }
}

/// A decoding error in a sentence, without the coding path's type names.
private func describing(_ error: any Error) -> String {
  switch error as? DecodingError {
  case .keyNotFound(let key, _): "'\(key.stringValue)' is missing"
  case .typeMismatch(_, let context), .valueNotFound(_, let context):
    "'\(context.codingPath.map(\.stringValue).joined(separator: "."))' has the wrong type"
  case .dataCorrupted(let context) where !context.codingPath.isEmpty:
    "'\(context.codingPath.map(\.stringValue).joined(separator: "."))' is \(context.debugDescription)"
  case .dataCorrupted: "it is not valid JSON"
  default: "it could not be read"
  }
}

private func jsonResponse(_ status: HTTPResponse.Status, _ value: some Encodable) -> Response {
  let encoder = JSONEncoder()
  encoder.outputFormatting = .sortedKeys
  let data = (try? encoder.encode(value)) ?? Data("{}".utf8)
  return Response(
    status: status,
    headers: [.contentType: "application/json"],
    body: ResponseBody(byteBuffer: ByteBuffer(data: data))
  )
}

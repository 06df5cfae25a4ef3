import AsyncHTTPClient
import Foundation
import HTTPTypes
import Hummingbird
import Logging
import Metrics
import NIOCore
import NIOHTTP1
import ServiceLifecycle
import Synchronization
import Unidirectional

/// Forwards a request for a session that another instance owns to that instance, so that every
/// instance of a service serves every key and no client sees `ownershipLost` while the owner is up.
///
/// ```swift
/// let router = Router()
/// router.add(middleware: JSONErrorMiddleware())
/// router.add(middleware: ForwardingMiddleware(registry: carts, client: httpClient))
/// carts.advertisedAddress = "http://10.0.0.7:8080"   // how the other instances reach this one
/// ```
///
/// A route below it that throws ``SessionError/ownershipLost(key:message:)`` has its request
/// sent once to the owner the registry learned (``StoreRegistry/owner(of:)``), at the address
/// recorded with its lease: method, path and query, headers (`Idempotency-Key` and the request id
/// among them) and body. The owner's answer comes back as it is, streamed (an SSE stream too).
///
/// - A forwarded request carries `Unidirectional-Forwarded` and is never forwarded again: if it
///   meets `ownershipLost` at the owner (the lease moved meanwhile), it is answered 409.
/// - A key whose owner recorded this instance's own address under another name (the owner's
///   process restarted here as another owner) is answered 503 with `Retry-After`, forwarded or
///   not, as for an owner that cannot be reached: the owner is no longer there.
/// - An owner that cannot be reached is noted as such for what its lease had left, so the next
///   requests for its keys do not try it again; they are answered 503 with `Retry-After` (those
///   seconds). Once its lease expires, the instance a request reaches takes the key over.
/// - An owner is waited for at most until its lease runs out, and a second more: one that has
///   not answered by then is not renewing its leases either (a paused or hung process, whose
///   connections the kernel still accepts), and the next request takes the key over.
/// - Bodies are buffered (up to `maximumBodySize`) so that they can be sent again.
public struct ForwardingMiddleware<Context: RequestContext>: RouterMiddleware {
  /// The header a forwarded request carries (its value: the forwarding instance's address).
  public static var forwardedHeader: String { "Unidirectional-Forwarded" }

  private let client: HTTPClient
  private let owner: @Sendable (String) -> SessionOwner?
  private let forget: @Sendable (String) -> Void
  private let address: @Sendable () -> String?
  private let ownName: String
  private let unreachable: UnreachableOwners
  private let maximumBodySize: Int
  private let timeout: Duration
  private let forwarded: Counter

  /// Forwards the requests of `registry`'s sessions.
  ///
  /// - Parameters:
  ///   - registry: The registry whose `ownershipLost` errors are forwarded; its
  ///     ``StoreRegistry/advertisedAddress`` is this instance's.
  ///   - client: The HTTP client forwarded requests go through (one, shared, with a bounded
  ///     connection pool).
  ///   - maximumBodySize: The largest body buffered (a larger one is answered 413).
  ///   - timeout: How long a forwarded request may wait for the owner's response to begin (less
  ///     when the owner's lease runs out sooner); a streamed body (an SSE stream) then runs as
  ///     long as the owner sends it.
  ///   - metricsFactory: Where `unidirectional_forwarded_requests_total` goes.
  public init<R: Reducer & SendableMetatype>(
    registry: StoreRegistry<String, R>,
    client: HTTPClient,
    maximumBodySize: Int = 64 * 1024,
    timeout: Duration = .seconds(30),
    metricsFactory: any MetricsFactory = MetricsSystem.factory
  ) where R.State: Sendable {
    self.forwarded = Counter(
      label: "unidirectional_forwarded_requests_total",
      factory: metricsFactory
    )
    self.client = client
    self.owner = { registry.owner(of: $0) }
    self.forget = { registry.forgetOwner(of: $0) }
    self.address = { registry.advertisedAddress }
    self.ownName = registry.owner
    self.unreachable = UnreachableOwners()
    self.maximumBodySize = maximumBodySize
    self.timeout = timeout
  }

  /// Runs the route; forwards its request when the session is another instance's.
  public func handle(
    _ request: Request,
    context: Context,
    next: (Request, Context) async throws -> Response
  ) async throws -> Response {
    var request = request
    let isForwarded = request.headers.contains { $0.name.canonicalName == forwardedName }
    if !isForwarded {
      try request.refuseDeclaredBody(over: self.maximumBodySize)
      _ = try await request.collectBody(upTo: self.maximumBodySize)
    }
    do {
      return try await next(request, context)
    } catch let error as SessionError {
      guard case .ownershipLost(let key, _) = error, let owner = self.owner(key) else {
        throw error
      }
      if let address = owner.address, address == self.address(), owner.name != self.ownName,
        let left = owner.leaseLeft
      {
        // NB: the owner recorded this instance's address: it ran here under another name (a
        // restart) and is gone, as good as unreachable until its lease runs out. Forwarded here
        // or asked directly, a 409 was not retried.
        throw OwnerUnreachable(retryAfterSeconds: SessionOwner.seconds(left))
      }
      guard !isForwarded, let address = owner.address, address != self.address() else {
        throw error
      }
      return try await self.forward(request, context, key: key, to: address, owner: owner)
    }
  }

  private func forward(
    _ request: Request,
    _ context: Context,
    key: String,
    to address: String,
    owner: SessionOwner
  ) async throws -> Response {
    if let left = self.unreachable.timeLeft(for: owner, at: address) {
      throw OwnerUnreachable(retryAfterSeconds: SessionOwner.seconds(left))
    }
    var outbound = HTTPClientRequest(url: address + request.uri.description)
    outbound.method = HTTPMethod(rawValue: request.method.rawValue)
    for field in request.headers where !hopByHop.contains(field.name.canonicalName) {
      outbound.headers.add(name: field.name.rawName, value: field.value)
    }
    outbound.headers.replaceOrAdd(name: Self.forwardedHeader, value: self.address() ?? "unknown")
    if !outbound.headers.contains(name: "X-Request-ID"),
      let id = context.logger[metadataKey: "hb.request.id"]
    {
      outbound.headers.add(name: "X-Request-ID", value: "\(id)")
    }
    let body = try await request.body.collect(upTo: self.maximumBodySize)
    if body.readableBytes > 0 { outbound.body = .bytes(body) }
    self.forwarded.increment()
    let started = ContinuousClock.now
    let response: HTTPClientResponse
    do {
      response = try await self.client.execute(outbound, timeout: self.wait(for: owner))
    } catch {
      // NB: noted once for the rest of the owner's lease, so a dead owner costs one failed
      // connection, not one per request; the key's owner is learned afresh on the next request.
      let left = owner.leaseLeft.map { $0 - started.duration(to: .now) } ?? .seconds(1)
      self.unreachable.note(owner, at: address, for: left)
      self.forget(key)
      context.logger.warning(
        "the owner of a session did not answer a forwarded request",
        metadata: [
          "key": "\(key)", "owner": "\(owner.name)", "address": "\(address)", "error": "\(error)",
        ]
      )
      throw OwnerUnreachable(retryAfterSeconds: SessionOwner.seconds(left))
    }
    var headers = HTTPFields()
    for (name, value) in response.headers where !hopByHop.contains(name.lowercased()) {
      if let field = HTTPField.Name(name) { headers.append(HTTPField(name: field, value: value)) }
    }
    // NB: a forwarded stream (SSE) ends on this instance's graceful shutdown, as the owner's own
    // stream ends on the owner's: otherwise this instance's shutdown waited for the owner's.
    return Response(
      status: HTTPResponse.Status(code: Int(response.status.code)),
      headers: headers,
      body: ResponseBody(asyncSequence: response.body.cancelOnGracefulShutdown())
    )
  }
}

extension ForwardingMiddleware {
  /// How long to wait for `owner`'s answer to begin: the middleware's timeout, or until the
  /// owner's lease runs out and a second more, whichever is sooner.
  func wait(for owner: SessionOwner) -> TimeAmount {
    let wait = owner.leaseLeft.map { min(self.timeout, max($0, .zero) + .seconds(1)) }
    let (seconds, attoseconds) = (wait ?? self.timeout).components
    return .nanoseconds(seconds * 1_000_000_000 + attoseconds / 1_000_000_000)
  }
}

private let forwardedName = "unidirectional-forwarded"

/// Headers that belong to one connection, not to the request (RFC 9110 7.6.1), and the length,
/// which the forwarded body sets again.
private let hopByHop: Set<String> = [
  "connection", "keep-alive", "proxy-connection", "te", "trailer", "transfer-encoding",
  "upgrade", "host", "content-length",
]

/// The instance that owns a session did not answer: 503 with `Retry-After`, a JSON body.
public struct OwnerUnreachable: HTTPResponseError, Sendable {
  /// The seconds until the owner's lease expires (then another instance takes the key over).
  public let retryAfterSeconds: Int

  /// 503.
  public var status: HTTPResponse.Status { .serviceUnavailable }

  /// The JSON answer, with `Retry-After`.
  public func response(from request: Request, context: some RequestContext) throws -> Response {
    jsonErrorResponse(
      .serviceUnavailable,
      "the instance that owns this session does not answer; retry in \(self.retryAfterSeconds) s",
      headers: [.retryAfter: "\(self.retryAfterSeconds)"]
    )
  }
}

/// Owners that did not answer, each until its lease would have expired.
///
/// A note names the owner and its address: a new instance on a reused address is another owner.
/// And a noted owner whose lease is later seen to last beyond the note renewed it, so it is alive
/// again (restarted, or the failure was passing): its note goes.
final class UnreachableOwners: Sendable {
  private let until = Mutex<[String: ContinuousClock.Instant]>([:])

  func note(_ owner: SessionOwner, at address: String, for duration: Duration) {
    let deadline = ContinuousClock.now + duration
    self.until.withLock { until in
      until = until.filter { $0.value > .now }
      until["\(owner.name) \(address)"] = deadline
    }
  }

  /// How long `owner` at `address` is still noted as unreachable, or `nil`.
  func timeLeft(for owner: SessionOwner, at address: String) -> Duration? {
    let now = ContinuousClock.now
    let key = "\(owner.name) \(address)"
    return self.until.withLock { until in
      guard let deadline = until[key] else { return nil }
      let renewed = owner.leaseLeft.map { now + $0 > deadline + .milliseconds(250) } ?? false
      let left = now.duration(to: deadline)
      if left <= .zero || renewed {
        until.removeValue(forKey: key)
        return nil
      }
      return left
    }
  }
}

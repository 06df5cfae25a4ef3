import HTTPTypes
import Hummingbird
import Metrics
import Synchronization

/// Counts each request as `http_server_requests_total`, under its route's pattern (never the
/// path itself: `NotFound` for a path no route takes), its method and the status its client got.
///
/// NB: not Hummingbird's `MetricsMiddleware`, which also times every request into a histogram and
/// keeps a gauge of requests in flight, each behind a lock of swift-prometheus's: its cost on this
/// server's cheapest request showed beyond the spread between runs, a count's did not
/// (`Benchmarks/HISTORY.md`). A request's latency is the balancer's to measure, where the client is.
struct RequestCounter<Context: RequestContext>: RouterMiddleware {
  private struct Key: Hashable {
    let route: String
    let method: HTTPRequest.Method
    let status: Int
  }

  private final class Counters: Sendable {
    let byKey = Mutex<[Key: Counter]>([:])
  }

  private let counters = Counters()
  private let factory: any MetricsFactory

  /// Counts into `factory`'s metrics (the bootstrapped system's by default).
  init(factory: any MetricsFactory = MetricsSystem.factory) {
    self.factory = factory
  }

  func handle(
    _ request: Request,
    context: Context,
    next: (Request, Context) async throws -> Response
  ) async throws -> Response {
    do {
      let response = try await next(request, context)
      self.count(request, context, response.status)
      return response
    } catch {
      self.count(
        request,
        context,
        (error as? any HTTPResponseError)?.status ?? .internalServerError
      )
      throw error
    }
  }

  private func count(_ request: Request, _ context: Context, _ status: HTTPResponse.Status) {
    let key = Key(
      route: context.endpointPath ?? "NotFound",
      method: request.method,
      status: status.code
    )
    let counter = self.counters.byKey.withLock { counters in
      if let counter = counters[key] { return counter }
      let counter = Counter(
        label: "http_server_requests_total",
        dimensions: [
          ("http_route", key.route),
          ("http_request_method", key.method.rawValue),
          ("http_response_status_code", String(key.status)),
        ],
        factory: self.factory
      )
      counters[key] = counter
      return counter
    }
    counter.increment()
  }
}

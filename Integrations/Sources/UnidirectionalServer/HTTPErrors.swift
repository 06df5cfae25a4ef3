import Foundation
import Hummingbird
import Logging
import NIOHTTP1
import Unidirectional

/// A ``SessionError`` as an HTTP answer: a status, a JSON body `{"error": "..."}` that names no
/// host, path or database text, and `Retry-After` where retrying later can succeed.
///
/// | error | status |
/// |---|---|
/// | `shutDown` | 503, `Retry-After` |
/// | `storageFailed` | 503, `Retry-After` |
/// | `stateUnreadable` | 503, `Retry-After` (another version of the app may read it) |
/// | `ownershipLost` | 409 |
///
/// Thrown from a route (or mapped by ``JSONErrorMiddleware``), any Hummingbird app answers it so:
///
/// ```swift
/// router.add(middleware: JSONErrorMiddleware())
/// router.get("/carts/:id") { _, context in try await carts.state(of: context.parameters.require("id")) }
/// ```
public struct SessionHTTPError: HTTPResponseError, Sendable {
  /// The session error answered.
  public let error: SessionError
  /// The seconds a client should wait before retrying, for a 503.
  public let retryAfterSeconds: Int

  /// Maps `error`.
  ///
  /// - Parameters:
  ///   - error: The session error.
  ///   - retryAfterSeconds: The `Retry-After` of a 503 (at least 1).
  public init(_ error: SessionError, retryAfterSeconds: Int = 1) {
    self.error = error
    self.retryAfterSeconds = max(1, retryAfterSeconds)
  }

  /// 409 for `ownershipLost`, 503 for the others.
  public var status: HTTPResponse.Status {
    switch self.error {
    case .ownershipLost: .conflict
    case .shutDown, .storageFailed, .stateUnreadable: .serviceUnavailable
    }
  }

  /// What the body says: the kind of failure and what to do, never the underlying error's text
  /// (which may name hosts, files or database messages; it goes to the log).
  public var publicMessage: String {
    switch self.error {
    case .shutDown: "the service is shutting down; retry shortly"
    case .storageFailed: "the session's storage failed; retry shortly"
    case .stateUnreadable:
      "this session's stored state cannot be read by this version of the service"
    case .ownershipLost: "another instance owns this session; retry shortly"
    }
  }

  /// The JSON answer.
  public func response(from request: Request, context: some RequestContext) throws -> Response {
    var headers: HTTPFields = [:]
    if self.status == .serviceUnavailable { headers[.retryAfter] = "\(self.retryAfterSeconds)" }
    return jsonErrorResponse(self.status, self.publicMessage, headers: headers)
  }
}

/// Answers every error thrown below it with a JSON body `{"error": "..."}`, and logs the detail
/// with the request's id.
///
/// - ``SessionError``: as ``SessionHTTPError`` says (503 with `Retry-After`, or 409).
/// - `IdempotencyKeyReused`: 422, as the IETF draft on the `Idempotency-Key` header answers a
///   key reused for another request.
/// - Hummingbird's `HTTPError` and other `HTTPResponseError`s (404 for an unknown route, 413 for
///   a body past the limit, the app's own 400s): their status and headers, with their message or
///   the status's reason phrase.
/// - A body the HTTP parser refuses (a bad chunk size, a stream cut short): 400, naming the
///   parser's error.
/// - Anything else: 500, `"internal error"`; the error's text goes to the log only.
///
/// Add it first, so it sees what every later middleware and route throws:
/// `router.add(middleware: JSONErrorMiddleware())`.
///
/// What goes to the log depends on whose the failure is. The service's (a ``SessionError``, a
/// 5xx) is logged at `serverErrors`, `warning` by default: someone running the service must act
/// on it. A client's (a 4xx for its own bad request) is logged at `clientErrors`, `debug` by
/// default, as Hummingbird logs what it refuses: at `warning`, a client sending bad requests
/// in a loop would fill the log and hide the failures that page someone.
public struct JSONErrorMiddleware<Context: RequestContext>: RouterMiddleware {
  /// The level the service's own failures are logged at.
  public let serverErrors: Logger.Level
  /// The level a client's bad requests are logged at.
  public let clientErrors: Logger.Level

  /// Creates the middleware.
  ///
  /// - Parameters:
  ///   - serverErrors: The level of the service's failures (``SessionError``s and 5xx).
  ///   - clientErrors: The level of a client's bad requests (the other 4xx).
  public init(serverErrors: Logger.Level = .warning, clientErrors: Logger.Level = .debug) {
    self.serverErrors = serverErrors
    self.clientErrors = clientErrors
  }

  /// Runs the rest of the chain, answering what it throws.
  public func handle(
    _ request: Request,
    context: Context,
    next: (Request, Context) async throws -> Response
  ) async throws -> Response {
    do {
      return try await next(request, context)
    } catch let error as SessionError {
      let mapped = SessionHTTPError(error)
      self.log(context, request, status: mapped.status, error.description, self.serverErrors)
      return try mapped.response(from: request, context: context)
    } catch let error as SessionHTTPError {
      self.log(context, request, status: error.status, error.error.description, self.serverErrors)
      return try error.response(from: request, context: context)
    } catch let error as IdempotencyKeyReused {
      self.log(context, request, status: .unprocessableContent, error.description)
      return jsonErrorResponse(
        .unprocessableContent,
        "this Idempotency-Key was used before with another request; send a new request under a new key",
        headers: [:]
      )
    } catch let error as OwnerUnreachable {
      return try error.response(from: request, context: context)
    } catch let error as HTTPError {
      let message = error.body ?? error.status.reasonPhrase
      self.log(context, request, status: error.status, message)
      return jsonErrorResponse(error.status, message, headers: error.headers)
    } catch let error as HTTPParserError {
      // NB: the head parsed but the body did not (a bad chunk size, a stream cut short): the
      // client's mistake, not the server's; the parser's text names no host or path.
      self.log(context, request, status: .badRequest, "\(error)")
      return jsonErrorResponse(
        .badRequest,
        "the request's body is not valid HTTP/1.1: \(error)",
        headers: [:]
      )
    } catch let error as any HTTPResponseError {
      let status = error.status
      self.log(context, request, status: status, "\(error)")
      return jsonErrorResponse(status, status.reasonPhrase, headers: [:])
    } catch {
      self.log(context, request, status: .internalServerError, "\(error) (\(type(of: error)))")
      return jsonErrorResponse(.internalServerError, "internal error", headers: [:])
    }
  }

  /// Logs a failed request with its detail; the request logger carries the request's id.
  ///
  /// At `level`, or by its status when none is given: a 5xx at ``serverErrors``, a 4xx at
  /// ``clientErrors``.
  private func log(
    _ context: Context,
    _ request: Request,
    status: HTTPResponse.Status,
    _ detail: String,
    _ level: Logger.Level? = nil
  ) {
    context.logger.log(
      level: level ?? (status.code >= 500 ? self.serverErrors : self.clientErrors),
      "request failed",
      metadata: [
        "status": "\(status.code)",
        "method": "\(request.method)",
        "path": "\(request.uri.path)",
        "error": "\(detail)",
      ]
    )
  }
}

/// A JSON body `{"error": message}` with `status` and `headers`.
public func jsonErrorResponse(
  _ status: HTTPResponse.Status,
  _ message: String,
  headers: HTTPFields = [:]
) -> Response {
  var headers = headers
  headers[.contentType] = "application/json; charset=utf-8"
  let encoder = JSONEncoder()
  // NB: "HTTP/1.1", not "HTTP\/1.1": the same text as the parser's own refusals.
  encoder.outputFormatting = .withoutEscapingSlashes
  let data = (try? encoder.encode(["error": message])) ?? Data(#"{"error":"error"}"#.utf8)
  return Response(
    status: status,
    headers: headers,
    body: ResponseBody(byteBuffer: ByteBuffer(data: data))
  )
}

import HTTPTypes
import Hummingbird
import NIOCore
import NIOHTTPTypes

/// Gives the answer to a request that is not valid HTTP a JSON body, as every other error has.
///
/// Hummingbird answers a request its parser refuses (a request line or headers past the decoder's
/// limits, bytes that are not HTTP) with a 400 that has no body, before any route or middleware
/// sees it. This handler fills that answer in with `{"error": "..."}`; every other response passes
/// unchanged. Add it to the HTTP/1 server:
///
/// ```swift
/// let app = Application(
///   router: router,
///   server: .http1(configuration: .init(additionalChannelHandlers: [MalformedRequestHandler()]))
/// )
/// ```
public final class MalformedRequestHandler: ChannelOutboundHandler, RemovableChannelHandler {
  /// The responses the server writes.
  public typealias OutboundIn = HTTPResponsePart
  /// The same responses, the parser's 400 with its body.
  public typealias OutboundOut = HTTPResponsePart

  /// What the body of a refused request says.
  public static let message =
    "the request is not valid HTTP/1.1: its request line or headers are malformed or too large"

  /// Whether the response being written is the parser's bodiless 400.
  private var filling = false

  /// Creates the handler (one per connection).
  public init() {}

  /// Writes `data`, giving the parser's bodiless 400 its JSON body.
  public func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?)
  {
    switch self.unwrapOutboundIn(data) {
    case .head(var head)
    where head.status == .badRequest && head.headerFields[.contentLength] == "0"
      && head.headerFields[.connection] == "close":
      // NB: only the parser's answer is a 400 with no body that closes the connection: every
      // route and middleware error carries a JSON body.
      let body = Self.body(context.channel.allocator)
      head.headerFields[.contentLength] = "\(body.readableBytes)"
      head.headerFields[.contentType] = "application/json; charset=utf-8"
      self.filling = true
      context.write(self.wrapOutboundOut(.head(head)), promise: promise)
    case .end(let trailers) where self.filling:
      self.filling = false
      context.write(self.wrapOutboundOut(.body(Self.body(context.channel.allocator))), promise: nil)
      context.write(self.wrapOutboundOut(.end(trailers)), promise: promise)
    default:
      context.write(data, promise: promise)
    }
  }

  private static func body(_ allocator: ByteBufferAllocator) -> ByteBuffer {
    allocator.buffer(string: #"{"error":"\#(Self.message)"}"#)
  }
}

import Hummingbird

extension Request {
  /// Throws a 413 that closes the connection when the request declares (by `Content-Length`) a
  /// body larger than `limit`, before any of it is read.
  ///
  /// `collect(upTo:)` answers 413 only once `limit` bytes arrived: a client that declares a large
  /// body and sends it slowly, or not at all, holds the connection with no answer until it gives
  /// up. The connection closes because the body after the head is never read.
  public func refuseDeclaredBody(over limit: Int) throws {
    if let declared = self.headers[.contentLength].flatMap({ Int($0) }), declared > limit {
      throw HTTPError(.contentTooLarge, headers: [.connection: "close"])
    }
  }
}

import Hummingbird
import HummingbirdTesting
import InMemoryLogging
import Logging
import NIOCore
import Testing
import Unidirectional
import UnidirectionalServer

@testable import CartServer

/// What `JSONErrorMiddleware` logs: the detail an error body leaves out, with the request's id, at
/// a level set by whose failure it is.
@Suite(.timeLimit(.minutes(1))) struct ErrorLogTests {
  @Test func theServicesFailuresAreWarningsWithTheirDetailAndAClientsMistakesAreDebug() async throws
  {
    let storage = InMemorySessionStorage<String, Cart.State>()
    let carts = Carts(storage: storage, owner: "test") {
      Cart.State(customer: $0)
    } reducer: {
      Cart()
    }
    let handler = InMemoryLogHandler()
    var logger = Logger(label: "cart-server") { _ in handler }
    logger.logLevel = .debug
    let app = Application(router: makeRouter(carts: carts), logger: logger)
    try await app.test(.router) { client in
      // A client's mistakes, in a loop, must not fill an operator's log.
      for _ in 0..<3 {
        try await client.execute(uri: "/carts/alice/items", method: .post, body: .init(string: "{"))
        { response in
          #expect(response.status == .badRequest)
        }
        try await client.execute(uri: "/carts/alice/items", method: .post, body: tooMany) {
          response in
          #expect(response.status == .badRequest)
        }
      }
      let clientLines = handler.entries.filter { $0.message.description == "request failed" }
      #expect(clientLines.count == 6)
      #expect(clientLines.allSatisfy { $0.level == .debug && $0.metadata["status"] == "400" })
      #expect(!handler.entries.contains { $0.level >= .notice })

      // The service's failure: the body names no host; the log does, with the request's id.
      storage.failOperations(with: DatabaseUnreachable())
      try await client.execute(uri: "/carts/bob/items", method: .post, body: apple) { response in
        #expect(response.status == .serviceUnavailable)
        let message = try errorMessage(response)
        #expect(!message.contains("db-7.internal"))
      }
      storage.failOperations(with: nil)
      let warnings = handler.entries.filter { $0.level == .warning }
      #expect(warnings.count == 1)
      let warning = try #require(warnings.first)
      #expect(warning.metadata["status"] == "503")
      #expect(warning.metadata["path"] == "/carts/bob/items")
      #expect(warning.metadata["error"]?.description.contains("db-7.internal") == true)
      #expect(warning.metadata["hb.request.id"] != nil)
    }
    await carts.shutdown(gracePeriod: .seconds(1))
  }

  @Test func theLevelsAreTheApps() async throws {
    let handler = InMemoryLogHandler()
    var logger = Logger(label: "app") { _ in handler }
    logger.logLevel = .trace
    let router = Router()
    router.add(middleware: JSONErrorMiddleware(serverErrors: .critical, clientErrors: .notice))
    router.get("/client") { _, _ -> String in throw HTTPError(.badRequest, message: "no") }
    router.get("/server") { _, _ -> String in throw DatabaseUnreachable() }
    try await Application(router: router, logger: logger).test(.router) { client in
      try await client.execute(uri: "/client", method: .get) { #expect($0.status == .badRequest) }
      try await client.execute(uri: "/server", method: .get) {
        #expect($0.status == .internalServerError)
      }
    }
    let levels = handler.entries.filter { $0.message.description == "request failed" }.map(\.level)
    #expect(levels == [.notice, .critical])
  }
}

private struct DatabaseUnreachable: Error, CustomStringConvertible {
  var description: String { "connection to db-7.internal:5432 refused" }
}

private let apple = ByteBuffer(string: #"{"item": "apple", "quantity": 1}"#)
private let tooMany = ByteBuffer(string: #"{"item": "apple", "quantity": 0}"#)

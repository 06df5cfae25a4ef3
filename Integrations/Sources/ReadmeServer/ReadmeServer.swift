// The README's *Use it in a server* snippet, as a server that builds and runs: the lines between
// `README:begin` and `README:end` are in README.md word for word (ReadmeServerTests checks).
//   swift run --package-path Integrations readme-server [--port 8080] [--path carts.sqlite]
import Foundation
import Hummingbird
import Logging
import Unidirectional
import UnidirectionalSQLite
import UnidirectionalServer

/// A customer's cart: items and their quantities.
struct Cart: Reducer {
  struct State: Codable, Equatable, Sendable, ResponseEncodable {
    var customer: String
    var items: [String: Int] = [:]
  }
  enum Action: Sendable {
    case add(item: String, quantity: Int)
  }
  func reduce(into state: inout State, action: Action) -> Effect<Action> {
    switch action {
    case .add(let item, let quantity):
      // Bounded, and no arithmetic that can trap: a reducer that traps stops the process.
      let (total, overflow) = state.items[item, default: 0].addingReportingOverflow(quantity)
      if !overflow, quantity > 0, total <= 1_000_000 { state.items[item] = total }
    }
    return .none
  }
}

struct AddItem: Decodable {
  var item: String
  var quantity: Int
}

@main
struct ReadmeServer {
  static func main() async throws {
    var port = 8080
    var path = "carts.sqlite"
    var arguments = CommandLine.arguments.dropFirst()
    while let flag = arguments.popFirst() {
      guard let value = arguments.popFirst() else { throw UsageError(flag: flag) }
      switch flag {
      case "--port": port = Int(value) ?? port
      case "--path": path = value
      default: throw UsageError(flag: flag)
      }
    }
    LoggingSystem.bootstrap(StreamLogHandler.standardError)
    // README:begin
    let logger = Logger(label: "carts")
    let storage = try await SQLiteSessionStorage<String, Cart.State>(path: path)
    let carts = StoreRegistry(
      storage: storage,
      // One name per instance: a restart takes its own leases back at once, and two
      // instances on one machine never hold the same lease.
      owner: "\(ProcessInfo.processInfo.hostName):\(port)",
      idleTimeout: .seconds(300),
      capacity: 100_000,
      observer: { key in LoggingObserver<Cart.State, Cart.Action>(logger: logger, key: key) }
    ) { customer in
      Cart.State(customer: customer)
    } reducer: {
      Cart()
    }

    let router = Router()
    router.add(middleware: JSONErrorMiddleware())  // SessionError → 503 + Retry-After or 409
    router.post("/carts/:customer/items") { request, context -> Cart.State in
      let customer = try context.parameters.require("customer")
      let add = try await request.decode(as: AddItem.self, context: context)
      // Returns once the cart after this add is on disk.
      return try await carts.send(
        .add(item: add.item, quantity: add.quantity),
        to: customer,
        reading: { $0 }
      )
    }
    router.get("/carts/:customer") { _, context -> Cart.State in
      try await carts.state(of: context.parameters.require("customer"))
    }
    let app = Application(
      router: router,
      configuration: .init(address: .hostname("127.0.0.1", port: port)),
      services: [carts],  // on SIGTERM the server stops, then every cart is saved
      logger: logger
    )
    try await app.runService()
    // README:end
  }
}

struct UsageError: Error, CustomStringConvertible {
  let flag: String
  var description: String { "readme-server [--port 8080] [--path carts.sqlite]: not '\(flag)'" }
}

import Unidirectional

/// A customer's cart: items and their quantities, and how many changes were applied.
struct Cart: Reducer {
  /// The cart, stored as JSON.
  struct State: Codable, Equatable, Sendable {
    var customer: String
    var items: [String: Int] = [:]
    /// The number of actions applied to this cart.
    var version = 0

    init(customer: String, items: [String: Int] = [:], version: Int = 0) {
      self.customer = customer
      self.items = items
      self.version = version
    }
  }

  enum Action: Sendable, Equatable {
    case add(item: String, quantity: Int)
    case remove(item: String)
  }

  init() {}

  func reduce(into state: inout State, action: Action) -> Effect<Action> {
    switch action {
    case .add(let item, let quantity):
      state.items[item, default: 0] += quantity
      state.version += 1
    case .remove(let item):
      state.items.removeValue(forKey: item)
      state.version += 1
    }
    return .none
  }
}

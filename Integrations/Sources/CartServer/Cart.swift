import Unidirectional

/// A customer's cart: items and their quantities, and how many changes were applied.
///
/// Its limits are explicit, and no arithmetic in it can trap: an add past them (or one that would
/// overflow, from a state an earlier version stored) changes nothing and says why in
/// ``State/refusal``, which the server answers with 400. No input or stored state stops the
/// process here.
struct Cart: Reducer {
  /// The most of one item a cart holds.
  static let maximumQuantity = 1_000_000
  /// The most distinct items a cart holds.
  static let maximumItems = 1_000

  /// The cart, stored as JSON.
  struct State: Codable, Equatable, Sendable {
    var customer: String
    var items: [String: Int] = [:]
    /// The number of actions applied to this cart.
    var version = 0
    /// Why the last action was refused; `nil` when it was applied.
    ///
    /// Neither stored nor compared: the server reads it right after the action.
    var refusal: String?

    init(customer: String, items: [String: Int] = [:], version: Int = 0) {
      self.customer = customer
      self.items = items
      self.version = version
    }

    enum CodingKeys: String, CodingKey {
      case customer, items, version
    }

    static func == (lhs: State, rhs: State) -> Bool {
      lhs.customer == rhs.customer && lhs.items == rhs.items && lhs.version == rhs.version
    }
  }

  enum Action: Sendable, Equatable {
    case add(item: String, quantity: Int)
    case remove(item: String)
  }

  init() {}

  func reduce(into state: inout State, action: Action) -> Effect<Action> {
    state.refusal = nil
    let (version, versionOverflow) = state.version.addingReportingOverflow(1)
    guard !versionOverflow else {
      state.refusal = "this cart has taken all the changes it can count"
      return .none
    }
    switch action {
    case .add(let item, let quantity):
      let current = state.items[item] ?? 0
      let (total, overflow) = current.addingReportingOverflow(quantity)
      if quantity < 1 {
        state.refusal = "quantity must be at least 1, not \(quantity)"
      } else if overflow || total > Self.maximumQuantity {
        state.refusal = """
          a cart holds at most \(Self.maximumQuantity) of one item; it has \(current) of this one
          """
      } else if current == 0, state.items.count >= Self.maximumItems {
        state.refusal = "a cart holds at most \(Self.maximumItems) different items"
      } else {
        state.items[item] = total
        state.version = version
      }
    case .remove(let item):
      state.items.removeValue(forKey: item)
      state.version = version
    }
    return .none
  }
}

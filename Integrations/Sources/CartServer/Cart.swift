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
    /// Why the last action was refused, and the request that sent it; `nil` when it was applied.
    ///
    /// Neither stored nor compared: the server reads it right after the action, and only as its
    /// own request's. A retry answered from the cart as it is (its idempotency key already
    /// applied) reads the cart after whatever came last, perhaps another request's refusal.
    var refusal: Refusal?

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

  /// Why an action was refused, and the request that sent it.
  struct Refusal: Sendable, Equatable {
    /// The request that sent the action (0: none named).
    var request: UInt64
    var reason: String
  }

  /// `request` names the request that sent an action (0: none), so a refusal is read as that
  /// request's only.
  enum Action: Sendable, Equatable {
    case add(item: String, quantity: Int, request: UInt64 = 0)
    case remove(item: String, request: UInt64 = 0)
  }

  init() {}

  func reduce(into state: inout State, action: Action) -> Effect<Action> {
    state.refusal = nil
    let request: UInt64
    switch action {
    case .add(_, _, let sender), .remove(_, let sender): request = sender
    }
    let (version, versionOverflow) = state.version.addingReportingOverflow(1)
    guard !versionOverflow else {
      state.refusal = Refusal(
        request: request,
        reason: "this cart has taken all the changes it can count"
      )
      return .none
    }
    switch action {
    case .add(let item, let quantity, _):
      let current = state.items[item] ?? 0
      let (total, overflow) = current.addingReportingOverflow(quantity)
      if quantity < 1 {
        state.refusal = Refusal(
          request: request,
          reason: "quantity must be at least 1, not \(quantity)"
        )
      } else if overflow || total > Self.maximumQuantity {
        state.refusal = Refusal(
          request: request,
          reason: """
            a cart holds at most \(Self.maximumQuantity) of one item; it has \(current) of this one
            """
        )
      } else if current == 0, state.items.count >= Self.maximumItems {
        state.refusal = Refusal(
          request: request,
          reason: "a cart holds at most \(Self.maximumItems) different items"
        )
      } else {
        state.items[item] = total
        state.version = version
      }
    case .remove(let item, _):
      state.items.removeValue(forKey: item)
      state.version = version
    }
    return .none
  }
}

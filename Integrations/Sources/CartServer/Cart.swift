import Unidirectional

/// A customer's cart: items and their quantities, and how many changes were applied.
///
/// Its limits are explicit, and no arithmetic in it can trap: an add past them (or one that would
/// overflow, from a state an earlier version stored) changes nothing and says why in
/// ``State/refusals``, which the server answers with 400. No input or stored state stops the
/// process here.
struct Cart: Reducer {
  /// The most of one item a cart holds.
  static let maximumQuantity = 1_000_000
  /// The most distinct items a cart holds.
  static let maximumItems = 1_000
  /// How many of its latest refusals a cart remembers.
  static let rememberedRefusals = 32

  /// The cart, stored as JSON.
  struct State: Codable, Equatable, Sendable {
    var customer: String
    var items: [String: Int] = [:]
    /// The number of actions applied to this cart.
    var version = 0
    /// The cart's latest refusals, oldest first, at most ``Cart/rememberedRefusals``.
    ///
    /// Stored with the cart, so a retry of a refused request (its idempotency key already taken,
    /// so not reduced again) is answered with the same refusal, after a restart or on another
    /// instance too. Not part of the cart's HTTP body (``CartBody``).
    var refusals: [Refusal] = []

    init(customer: String, items: [String: Int] = [:], version: Int = 0) {
      self.customer = customer
      self.items = items
      self.version = version
    }

    enum CodingKeys: String, CodingKey {
      case customer, items, version, refusals
    }

    init(from decoder: any Decoder) throws {
      let container = try decoder.container(keyedBy: CodingKeys.self)
      self.customer = try container.decode(String.self, forKey: .customer)
      self.items = try container.decode([String: Int].self, forKey: .items)
      self.version = try container.decode(Int.self, forKey: .version)
      // NB: a cart an earlier version stored has none.
      self.refusals = try container.decodeIfPresent([Refusal].self, forKey: .refusals) ?? []
    }

    func encode(to encoder: any Encoder) throws {
      var container = encoder.container(keyedBy: CodingKeys.self)
      try container.encode(self.customer, forKey: .customer)
      try container.encode(self.items, forKey: .items)
      try container.encode(self.version, forKey: .version)
      // NB: a cart with none is stored as an earlier version stored it.
      if !self.refusals.isEmpty { try container.encode(self.refusals, forKey: .refusals) }
    }

    /// The refusal of `request`, if the cart refused it and still remembers it.
    func refusal(of request: UInt64) -> Refusal? {
      self.refusals.last { $0.request == request }
    }

    fileprivate mutating func refuse(_ request: UInt64, _ reason: String) {
      if self.refusals.count >= Cart.rememberedRefusals {
        self.refusals.removeFirst(self.refusals.count - Cart.rememberedRefusals + 1)
      }
      self.refusals.append(Refusal(request: request, reason: reason))
    }
  }

  /// Why an action was refused, and the request that sent it.
  struct Refusal: Codable, Sendable, Equatable {
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
    let request: UInt64
    switch action {
    case .add(_, _, let sender), .remove(_, let sender): request = sender
    }
    let (version, versionOverflow) = state.version.addingReportingOverflow(1)
    guard !versionOverflow else {
      state.refuse(request, "this cart has taken all the changes it can count")
      return .none
    }
    switch action {
    case .add(let item, let quantity, _):
      let current = state.items[item] ?? 0
      let (total, overflow) = current.addingReportingOverflow(quantity)
      if quantity < 1 {
        state.refuse(request, "quantity must be at least 1, not \(quantity)")
      } else if overflow || total > Self.maximumQuantity {
        state.refuse(
          request,
          "a cart holds at most \(Self.maximumQuantity) of one item; it has \(current) of this one"
        )
      } else if current == 0, state.items.count >= Self.maximumItems {
        state.refuse(request, "a cart holds at most \(Self.maximumItems) different items")
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

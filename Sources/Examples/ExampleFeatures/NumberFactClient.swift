public import Unidirectional

/// Gives a fact about a number.
///
/// The live one computes it offline; tests substitute their own.
public struct NumberFactClient: Sendable {
  /// Returns a fact about the number.
  public var fetch: @Sendable (Int) async throws -> String

  /// Creates a client from its endpoint.
  public init(fetch: @escaping @Sendable (Int) async throws -> String) {
    self.fetch = fetch
  }
}

extension NumberFactClient: DependencyKey {
  /// Computed facts: parity, primality, perfect squares and digit sums.
  ///
  /// No network needed.
  public static let liveValue = NumberFactClient { number in
    var facts: [String] = []
    facts.append(number.isMultiple(of: 2) ? "even" : "odd")
    if isPrime(number) { facts.append("prime") }
    let root = Int(Double(abs(number)).squareRoot())
    if number >= 0 && root * root == number { facts.append("a perfect square (\(root)²)") }
    let digitSum = String(abs(number)).compactMap(\.wholeNumberValue).reduce(0, +)
    facts.append("has a digit sum of \(digitSum)")
    return "\(number) is " + facts.joined(separator: ", ") + "."
  }

  /// Fails the test when called: a test that needs facts provides its own.
  public static let testValue = NumberFactClient { _ in
    try unimplemented("NumberFactClient.fetch")
  }
}

extension DependencyValues {
  /// Facts about numbers, for the counter's "fact" command.
  public var numberFact: NumberFactClient {
    get { self[NumberFactClient.self] }
    set { self[NumberFactClient.self] = newValue }
  }
}

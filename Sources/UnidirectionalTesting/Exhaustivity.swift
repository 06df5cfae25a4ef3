/// How much a ``TestStore`` requires a test to assert.
public enum Exhaustivity: Equatable, Sendable {
  /// Every state change, received action and running effect must be asserted.
  case on
  /// Only what the test names is asserted; the rest is skipped, and printed when
  /// `showSkippedAssertions` is `true`.
  case off(showSkippedAssertions: Bool)

  /// Non-exhaustive, without printing what was skipped.
  public static let off = Self.off(showSkippedAssertions: false)
}

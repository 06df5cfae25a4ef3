/// The one timer of a debounce id: its deadline and the body to run then, replaced in place by
/// every newer debounced effect while the timer sleeps.
struct DebounceSlot: Sendable {
  let generation: UInt64
  /// An instant of the debounce's clock.
  var deadline: any Sendable
  /// The latest debounced body; `nil` once fired.
  var body: (any Sendable)?
  /// Whether the timer takes no new deadline: it is running its body, or may have been cancelled.
  ///
  /// A newer debounced effect then starts a new timer (cancelling this one).
  var hasFired = false
}

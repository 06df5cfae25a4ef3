extension Reducer {
  /// Prints each action this reducer receives and a diff of the state change it made.
  ///
  /// ```swift
  /// Store(initialState: App.State()) {
  ///   App()._printChanges()
  /// }
  /// // received action:
  /// //   .incrementTapped
  /// //     Counter.State(
  /// //   -   count: 0,
  /// //   +   count: 1,
  /// //       ...
  /// ```
  ///
  /// The dump and diff run on a background task, off the store's hot path, and go to `printer`
  /// (standard output by default) in the order the actions were reduced.
  ///
  /// - Parameter printer: Receives each printed entry.
  /// - Returns: This reducer, printing what each action changed.
  public func _printChanges(
    to printer: @escaping @Sendable (String) -> Void = { print($0) }
  ) -> PrintChangesReducer<Self> where State: Sendable {
    PrintChangesReducer(base: self, printer: ChangePrinter(printer))
  }

  /// The same as `_printChanges(to:)`: prints each action and the state change it made.
  public func debug(
    to printer: @escaping @Sendable (String) -> Void = { print($0) }
  ) -> PrintChangesReducer<Self> where State: Sendable {
    self._printChanges(to: printer)
  }
}

/// The reducer `_printChanges(to:)` and ``Reducer/debug(to:)`` return.
public struct PrintChangesReducer<Base: Reducer>: Reducer where Base.State: Sendable {
  let base: Base
  let printer: ChangePrinter

  /// Runs the base reducer and prints the action and the state change it made.
  public func reduce(into state: inout Base.State, action: Base.Action) -> Effect<Base.Action> {
    let before = state
    let effect = self.base.reduce(into: &state, action: action)
    let after = state
    self.printer.enqueue {
      var entry =
        "received action:\n  " + customDump(action).replacingOccurrences(of: "\n", with: "\n  ")
      if let diff = diffDumps(customDump(before), customDump(after)) {
        entry +=
          "\n"
          + diff.split(separator: "\n", omittingEmptySubsequences: false)
          .map { "  " + $0 }.joined(separator: "\n")
      } else {
        entry += "\n  (No state changes)"
      }
      return entry
    }
    return effect
  }
}

/// Formats and prints entries in order on one background task per burst.
final class ChangePrinter: Sendable {
  private let printer: @Sendable (String) -> Void
  private let queue = LockedBox(Queue())

  private struct Queue {
    var pending: [@Sendable () -> String] = []
    var isDraining = false
  }

  init(_ printer: @escaping @Sendable (String) -> Void) {
    self.printer = printer
  }

  func enqueue(_ entry: @escaping @Sendable () -> String) {
    let startDraining = self.queue.withLock { queue in
      queue.pending.append(entry)
      defer { queue.isDraining = true }
      return !queue.isDraining
    }
    guard startDraining else { return }
    // NB: a detached task keeps formatting off the store; it is not an effect (it sends no
    // actions) and ends when the queue is empty.
    Task.detached(priority: .utility) { self.drain() }
  }

  private func drain() {
    while true {
      let entries = self.queue.withLock { queue -> [@Sendable () -> String] in
        defer { queue.pending = [] }
        if queue.pending.isEmpty { queue.isDraining = false }
        return queue.pending
      }
      if entries.isEmpty { return }
      for entry in entries { self.printer(entry()) }
    }
  }
}

extension String {
  fileprivate func replacingOccurrences(of target: String, with replacement: String) -> String {
    self.split(separator: target, omittingEmptySubsequences: false).joined(separator: replacement)
  }
}

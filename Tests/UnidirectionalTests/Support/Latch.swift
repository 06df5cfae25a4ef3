import Unidirectional

/// A one-shot signal tasks can wait for, resumed by whoever opens it (no polling, no sleeps).
final class Latch: Sendable {
  private let state = LockIsolated<State>(State())

  private struct State: Sendable {
    var isOpen = false
    var waiters: [UnsafeContinuation<Void, Never>] = []
  }

  init() {}

  var isOpen: Bool { self.state.value.isOpen }

  func open() {
    let waiters = self.state.withValue { state -> [UnsafeContinuation<Void, Never>] in
      state.isOpen = true
      defer { state.waiters = [] }
      return state.waiters
    }
    for waiter in waiters { waiter.resume() }
  }

  func wait() async {
    await withUnsafeContinuation { continuation in
      let resumeNow = self.state.withValue { state -> Bool in
        if state.isOpen { return true }
        state.waiters.append(continuation)
        return false
      }
      if resumeNow { continuation.resume() }
    }
  }
}

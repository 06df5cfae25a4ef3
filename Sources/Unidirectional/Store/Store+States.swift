import Synchronization

extension Store {
  /// The store's states: the current state first, then the state after every action.
  ///
  /// Each reader holds at most one pending state: a reader slower than the store skips to the
  /// latest state instead of building a backlog. The sequence ends when the store shuts down.
  ///
  /// ```swift
  /// for await state in store.states {
  ///   render(state)
  /// }
  /// ```
  public nonisolated var states: StoreStates<State> {
    StoreStates { await self.subscribeToStates() }
  }

  private func subscribeToStates() -> StateSubscription<State>? {
    self.core.subscribeToStates()
  }
}

/// The states of a ``Store``: the current state, then each change, latest-wins per reader.
public struct StoreStates<State: Sendable>: AsyncSequence, Sendable {
  /// Each element is a state of the store.
  public typealias Element = State
  /// Iterating never throws.
  public typealias Failure = Never

  let subscribe: @Sendable () async -> StateSubscription<State>?

  /// Creates the iterator; the subscription starts with its first `next()`.
  public func makeAsyncIterator() -> Iterator {
    Iterator(subscribe: self.subscribe)
  }

  /// Transforms each state, for example to observe part of it.
  public func map<Part: Sendable>(
    _ transform: @escaping @Sendable (State) -> Part
  ) -> StoreStates<Part> {
    let subscribe = self.subscribe
    return StoreStates<Part> {
      await subscribe()?.map(transform)
    }
  }

  /// Iterates a store's states.
  public struct Iterator: AsyncIteratorProtocol {
    let subscribe: @Sendable () async -> StateSubscription<State>?
    var subscription: StateSubscription<State>?
    var hasSubscribed = false

    /// The next state, or `nil` once the store has shut down or the task was cancelled.
    public mutating func next() async -> State? {
      if !self.hasSubscribed {
        self.hasSubscribed = true
        self.subscription = await self.subscribe()
      }
      guard let subscription = self.subscription else { return nil }
      let state = await subscription.next()
      if state == nil { self.subscription = nil }
      return state
    }
  }
}

@available(*, unavailable)
extension StoreStates.Iterator: Sendable {}

// MARK: - Broadcasting

/// One reader's subscription to a store's states.
@usableFromInline final class StateSubscription<State: Sendable>: Sendable {
  private let nextState: @Sendable () async -> State?
  private let end: (@Sendable () -> Void)?

  init(next: @escaping @Sendable () async -> State?, end: (@Sendable () -> Void)? = nil) {
    self.nextState = next
    self.end = end
  }

  deinit {
    self.end?()
  }

  func next() async -> State? {
    await self.nextState()
  }

  /// This subscription's states, transformed (the result keeps this one alive).
  func map<Part: Sendable>(
    _ transform: @escaping @Sendable (State) -> Part
  ) -> StateSubscription<Part> {
    StateSubscription<Part> { await self.next().map(transform) }
  }
}

/// Hands each published state to every reader, keeping at most one pending state per reader.
@usableFromInline final class StateBroadcaster<State: Sendable>: Sendable {
  private struct Readers: Sendable {
    var slots: [Int: Slot] = [:]
    var nextID = 0
    var isFinished = false
  }

  private struct Slot: Sendable {
    var latest: State?
    var waiter: UnsafeContinuation<State?, Never>?
  }

  private let readers = LockedBox(Readers())
  private let subscriberCount = Atomic<Int>(0)

  /// Read by the store after every action; subscriptions are made on the store too.
  @usableFromInline
  var hasSubscribers: Bool {
    self.subscriberCount.load(ordering: .relaxed) > 0
  }

  func subscribe(current: State) -> StateSubscription<State> {
    let id = self.readers.withLock { readers in
      defer { readers.nextID += 1 }
      readers.slots[readers.nextID] = Slot(latest: current, waiter: nil)
      return readers.nextID
    }
    self.subscriberCount.add(1, ordering: .relaxed)
    return StateSubscription(
      next: { await self.next(id) },
      end: { self.unsubscribe(id) }
    )
  }

  @usableFromInline
  func publish(_ state: State) {
    let woken = self.readers.withLock { readers in
      var woken: [UnsafeContinuation<State?, Never>] = []
      for index in readers.slots.indices {
        if let waiter = readers.slots.values[index].waiter {
          readers.slots.values[index].waiter = nil
          woken.append(waiter)
        } else {
          readers.slots.values[index].latest = state
        }
      }
      return woken
    }
    for waiter in woken { waiter.resume(returning: state) }
  }

  func finish() {
    let woken = self.readers.withLock { readers in
      readers.isFinished = true
      var woken: [UnsafeContinuation<State?, Never>] = []
      for index in readers.slots.indices {
        if let waiter = readers.slots.values[index].waiter {
          readers.slots.values[index].waiter = nil
          woken.append(waiter)
        }
      }
      return woken
    }
    for waiter in woken { waiter.resume(returning: nil) }
  }

  private func next(_ id: Int) async -> State? {
    let latest = self.readers.withLock { readers -> State? in
      defer { readers.slots[id]?.latest = nil }
      return readers.slots[id]?.latest
    }
    if let latest { return latest }
    return await withTaskCancellationHandler {
      await withUnsafeContinuation { continuation in
        let immediate = self.readers.withLock { readers -> State?? in
          guard readers.slots[id] != nil else { return .some(nil) }
          if let latest = readers.slots[id]?.latest {
            readers.slots[id]?.latest = nil
            return .some(latest)
          }
          if readers.isFinished { return .some(nil) }
          readers.slots[id]?.waiter = continuation
          return .none
        }
        if let immediate { continuation.resume(returning: immediate) }
      }
    } onCancel: {
      self.unsubscribe(id)
    }
  }

  private func unsubscribe(_ id: Int) {
    guard let slot = self.readers.withLock({ $0.slots.removeValue(forKey: id) }) else { return }
    self.subscriberCount.subtract(1, ordering: .relaxed)
    slot.waiter?.resume(returning: nil)
  }
}

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
      guard let base = await subscribe() else { return nil }
      return MappedSubscription(base: base, transform: transform)
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
///
/// Safety: subclasses hold only immutable, `Sendable` state.
class StateSubscription<State: Sendable>: @unchecked Sendable {
  func next() async -> State? { nil }
}

// Safety: immutable; both properties are `Sendable`.
final class MappedSubscription<Base: Sendable, State: Sendable>: StateSubscription<State>,
  @unchecked Sendable
{
  private let base: StateSubscription<Base>
  private let transform: @Sendable (Base) -> State

  init(base: StateSubscription<Base>, transform: @escaping @Sendable (Base) -> State) {
    self.base = base
    self.transform = transform
  }

  override func next() async -> State? {
    await self.base.next().map(self.transform)
  }
}

/// Hands each published state to every reader, keeping at most one pending state per reader.
///
/// Safety: `subscriberCount` is atomic; every `var` is guarded by `lock`.
@usableFromInline final class StateBroadcaster<State: Sendable>: @unchecked Sendable {
  private let lock = Lock()
  private let subscriberCount = Atomic<Int>(0)
  private var slots: [Int: Slot] = [:]
  private var nextID = 0
  private var isFinished = false

  private struct Slot {
    var latest: State?
    var waiter: UnsafeContinuation<State?, Never>?
  }

  /// Read by the store after every action; subscriptions are made on the store too.
  @usableFromInline
  var hasSubscribers: Bool {
    self.subscriberCount.load(ordering: .relaxed) > 0
  }

  func subscribe(current: State) -> StateSubscription<State> {
    let id = self.lock.withLock {
      defer { self.nextID += 1 }
      self.slots[self.nextID] = Slot(latest: current, waiter: nil)
      return self.nextID
    }
    self.subscriberCount.add(1, ordering: .relaxed)
    return BroadcastSubscription(broadcaster: self, id: id)
  }

  @usableFromInline
  func publish(_ state: State) {
    var woken: [UnsafeContinuation<State?, Never>] = []
    self.lock.lock()
    for index in self.slots.indices {
      if let waiter = self.slots.values[index].waiter {
        self.slots.values[index].waiter = nil
        woken.append(waiter)
      } else {
        self.slots.values[index].latest = state
      }
    }
    self.lock.unlock()
    for waiter in woken { waiter.resume(returning: state) }
  }

  func finish() {
    var woken: [UnsafeContinuation<State?, Never>] = []
    self.lock.lock()
    self.isFinished = true
    for index in self.slots.indices {
      if let waiter = self.slots.values[index].waiter {
        self.slots.values[index].waiter = nil
        woken.append(waiter)
      }
    }
    self.lock.unlock()
    for waiter in woken { waiter.resume(returning: nil) }
  }

  func next(_ id: Int) async -> State? {
    self.lock.lock()
    if let latest = self.slots[id]?.latest {
      self.slots[id]?.latest = nil
      self.lock.unlock()
      return latest
    }
    self.lock.unlock()
    return await withTaskCancellationHandler {
      await withUnsafeContinuation { continuation in
        self.lock.lock()
        guard self.slots[id] != nil else {
          self.lock.unlock()
          continuation.resume(returning: nil)
          return
        }
        if let latest = self.slots[id]?.latest {
          self.slots[id]?.latest = nil
          self.lock.unlock()
          continuation.resume(returning: latest)
          return
        }
        if self.isFinished {
          self.lock.unlock()
          continuation.resume(returning: nil)
          return
        }
        self.slots[id]?.waiter = continuation
        self.lock.unlock()
      }
    } onCancel: {
      self.unsubscribe(id)
    }
  }

  func unsubscribe(_ id: Int) {
    self.lock.lock()
    let slot = self.slots.removeValue(forKey: id)
    self.lock.unlock()
    guard let slot else { return }
    self.subscriberCount.subtract(1, ordering: .relaxed)
    slot.waiter?.resume(returning: nil)
  }
}

// Safety: immutable; the broadcaster is `Sendable`.
final class BroadcastSubscription<State: Sendable>: StateSubscription<State>, @unchecked Sendable {
  private let broadcaster: StateBroadcaster<State>
  private let id: Int

  init(broadcaster: StateBroadcaster<State>, id: Int) {
    self.broadcaster = broadcaster
    self.id = id
  }

  deinit {
    self.broadcaster.unsubscribe(self.id)
  }

  override func next() async -> State? {
    await self.broadcaster.next(self.id)
  }
}

import Synchronization

/// Many keyed stores in a server: one per session, user, room or device.
///
/// A registry activates a key's store on its first send, keeps at most one live store per key,
/// passivates stores that stay idle or exceed its capacity (least recently used first), and shuts
/// every store down with the server. With a ``SessionStorage`` it also makes sessions durable: a
/// key's state is loaded on activation, each send returns once the state after it is saved, and a
/// key is live in one registry at a time across every instance sharing the storage.
///
/// ```swift
/// let carts = StoreRegistry<String, Cart>(
///   idleTimeout: .seconds(300),
///   capacity: 100_000,
///   clock: ContinuousClock()
/// ) { key in
///   Cart.State(customer: key)
/// } reducer: {
///   Cart()
/// }
/// try await carts.send(.add(item), to: "alice")
/// let total = try await carts.send(.add(item), to: "alice", reading: { $0.total })
/// await carts.shutdown(gracePeriod: .seconds(5))
/// ```
///
/// - Sends throw ``SessionError``; nothing is dropped silently. A send that races with its key's
///   passivation waits for it and goes to the reactivated store, never to one shutting down.
/// - Passivation (``passivate(_:)``, idle, or capacity) is a graceful shutdown of the store:
///   effects marked ``Effect/cancelledOnShutdown()`` are cancelled, others get
///   `passivationGracePeriod` to finish; then, with storage, the state is saved and the lease
///   released. A passivating key is not live.
/// - Any action a store reduces, whatever sent it, restarts its idle period and makes it the most
///   recently used; ``liveStore(for:)`` and reading state do neither.
/// - Activating or passivating one key never blocks sends to other keys: the registry's lock is
///   never held across an `await`.
public final class StoreRegistry<Key: Hashable & Sendable, R: Reducer & SendableMetatype>: Sendable
where R.State: Sendable {
  /// The sessions' state.
  public typealias State = R.State
  /// The sessions' action.
  public typealias Action = R.Action

  /// The name this registry holds leases under.
  public let owner: String
  @usableFromInline let storage: (any SessionStorage<Key, State>)?
  let idleTimeout: Duration?
  let capacity: Int
  /// How long a passivating store's unmarked effects may run on (also the grace period a
  /// service wrapper gives ``shutdown(gracePeriod:)``).
  public let passivationGracePeriod: Duration
  /// How many idempotency keys each session keeps (its newest ones).
  public let idempotencyWindow: Int
  let clock: any Clock<Duration>
  let sessionClock: SessionClock
  /// The timeline leases are renewed on and counted against: the registry clock's, so a test
  /// advancing a ``TestClock`` renews and expires leases as it fires idle timers; but the
  /// continuous clock's for an ``ImmediateClock``, which measures no time (its sleeps return at
  /// once, so a renewal loop on it would never suspend and would hold a thread of the cooperative
  /// pool for as long as the registry lives).
  let leaseHost: any TimerHost
  let makeObserver: @Sendable (Key) -> (any StoreObserver<State, Action>)?
  /// Watches the registry as a whole (set once, before any session activates).
  let registryObserver: (any SessionRegistryObserver)?
  /// Whether the registry observer measures sends (a tracer): they then leave the fast path.
  @usableFromInline let measuresSends: Bool
  /// Makes a key's store from its state (stored, or `nil` for the initial one): formed in the
  /// module that creates the registry, so the store's per-action path is specialized for its
  /// reducer.
  let makeStore: MakeStore
  /// The state of a key never saved (what a read of it answers without activating it).
  let initialState: @Sendable (Key) -> State
  let dependencies: DependencyValues
  @usableFromInline let guarded = LockedBox(Guarded())
  let commits: GroupCommit<Key, State>?

  /// A key's session, from activation until its store has shut down (and, with storage, its
  /// state is saved and its lease released).
  ///
  /// The entry is its own idle timer: a record in its clock's timer queue, armed once it is live
  /// and re-armed lazily (an action does not touch the queue; a timer that fires early re-arms for
  /// the rest of the idle period). A separate timer object, its closure and the weak references
  /// it held were a large share of every session's bytes (the bytes-per-session row).
  // Safety: every stored `var` but `registry` (written once, in `init`) is read and written only
  // under the registry's lock, the timer's fields as `TimerEntry` says; `leaseHeldUntil` is atomic.
  @usableFromInline final class Entry: TimerEntry, @unchecked Sendable {
    enum Phase {
      /// Loading its state (with storage) and making its store.
      case activating
      /// Its store takes actions.
      case live(Store<State, Action>)
      /// Its store is shutting down (then it saves, and the entry goes).
      case passivating(Store<State, Action>)
    }

    let key: Key
    let activity: SessionActivity
    var phase = Phase.activating
    var token: UInt64 = 0
    var ownershipWasLost = false
    /// A save of this session failed: its store holds what storage refused and is discarded.
    var saveFailed = false
    /// The session is being erased: its store ends without a save, then its row is removed.
    var isErasing = false
    /// Idempotent sends between their check and their save, by key, with the retries of the
    /// same key waiting for them.
    var idempotentSends: [String: [UnsafeContinuation<Void, Never>]] = [:]
    /// Whether the idle timer was armed and passivation has not disarmed it yet.
    var isIdleTimerArmed = false
    /// Sends waiting for activation or passivation to end.
    var waiters: [UnsafeContinuation<Void, Never>] = []
    /// Sends reduced whose save has not ended, and a passivation waiting for them.
    var savesInProgress = 0
    var drainWaiters: [UnsafeContinuation<Void, Never>] = []
    /// Until when the key's lease is known to be held, on the lease timeline (``leaseHost``).
    ///
    /// A lease's length, less a margin, after its taking or last renewal began. Without storage,
    /// `.max`.
    let leaseHeldUntil = Atomic<Int64>(.max)

    /// The registry the idle timer reports to; weak, so an armed timer does not keep a registry
    /// nobody holds alive.
    private weak var registry: StoreRegistry?

    init(key: Key, clock: SessionClock, registry: StoreRegistry) {
      self.key = key
      self.activity = SessionActivity(clock: clock)
      self.registry = registry
      super.init(lifetime: nil, host: clock.host, deadline: .zero)
    }

    override func fire(on host: any TimerHost) async {
      self.registry?.idleTimerFired(self)
    }

    var liveStore: Store<State, Action>? {
      if case .live(let store) = self.phase { return store }
      return nil
    }

    /// How its passivation ends (read under the registry's lock).
    var ending: Ending {
      if self.isErasing { return .erase }
      if self.ownershipWasLost { return .discard }
      return self.saveFailed ? .discardAndRelease : .save
    }
  }

  @usableFromInline struct Guarded: Sendable {
    var entries: [Key: Entry] = [:]
    /// The store of every live entry, by key: exactly the entries whose phase is `live`.
    ///
    /// NB: what a send to a live key reads, a second table beside `entries`, so the send
    /// retains only the store it calls, as a dictionary of stores would. Read through `entries`,
    /// it retained and released the entry too: a line of memory more per request, a cache miss
    /// with many sessions (`Benchmarks/HISTORY.md` has the probe; the registry rows did not move
    /// beyond their noise). Kept in step with the
    /// entries' phases where they change: activation and `beginPassivating`.
    @usableFromInline var liveStores: [Key: Store<State, Action>] = [:]
    var liveCount: Int { self.liveStores.count }
    var isShutDown = false
    /// Where this registry says it is reached (recorded with every lease it takes).
    var advertisedAddress: String?
    /// The owners other instances hold keys under, as activations last learned them.
    var owners: [Key: SessionOwner] = [:]
    var renewal: Task<Void, Never>?
    /// The oldest live entries at the last scan for an eviction, oldest last, each with the
    /// recency stamp it had then (``StoreRegistry/leastRecentlyUsed(_:except:)``).
    var evictionOrder: [(entry: Entry, stamp: UInt64)] = []
    /// Mutation-testing switch: activation ignores the stored state, as an activation that raced
    /// ahead of the previous store's final save would see an older one.
    var breaksActivation = false
  }

  // MARK: - Creating a registry

  /// Creates a registry whose stores share one observer (or none).
  ///
  /// - Parameters:
  ///   - storage: Where sessions' state and leases live; `nil` keeps them in memory only.
  ///   - owner: The name this registry holds leases under; unique by default. Give each live
  ///     instance its own: two registries under one name take each key from each other (every
  ///     acquisition is a new lease, so the other's saves are refused, never written over), their
  ///     sends fail with ``SessionError/ownershipLost(key:message:)``, and a read may see the
  ///     other's older state until its next renewal. A restarted instance may reuse its name, to
  ///     take its leases back at once.
  ///   - idleTimeout: Passivates a store that reduced nothing for this long; `nil`: never.
  ///   - capacity: At most this many live stores; the least recently used passivates first.
  ///     `nil`: no limit.
  ///   - passivationGracePeriod: How long a passivating store's unmarked effects may run on.
  ///   - idempotencyWindow: How many idempotency keys each session keeps, its newest (see
  ///     ``send(_:to:idempotencyKey:reading:)``).
  ///   - clock: Measures idle periods, grace periods and lease renewals (a ``TestClock`` in tests;
  ///     on an ``ImmediateClock``, which measures no time, leases are renewed on the continuous
  ///     clock).
  ///   - observer: Watches every store the registry makes.
  ///   - registryObserver: Watches the registry as a whole (activations, passivations, the live
  ///     count, saves), for metrics.
  ///   - initialState: The state of a key that has none stored.
  ///   - reducer: Makes the feature's reducer.
  ///   - prepareDependencies: Overrides dependencies for every store the registry makes.
  @inlinable
  public convenience init(
    storage: (any SessionStorage<Key, State>)? = nil,
    owner: String? = nil,
    idleTimeout: Duration? = nil,
    capacity: Int? = nil,
    passivationGracePeriod: Duration = .seconds(10),
    idempotencyWindow: Int = 1_000,
    clock: any Clock<Duration> = ContinuousClock(),
    observer: (any StoreObserver<State, Action>)? = nil,
    registryObserver: (any SessionRegistryObserver)? = nil,
    initialState: @escaping @Sendable (Key) -> State,
    reducer: @escaping @Sendable () -> R,
    withDependencies prepareDependencies: (@Sendable (inout DependencyValues) -> Void)? = nil
  ) {
    self.init(
      storage: storage,
      owner: owner,
      idleTimeout: idleTimeout,
      capacity: capacity,
      passivationGracePeriod: passivationGracePeriod,
      idempotencyWindow: idempotencyWindow,
      clock: clock,
      makeObserver: { _ in observer },
      registryObserver: registryObserver,
      initialState: initialState,
      makeStore: Self.storeMaker(initialState: initialState, reducer: reducer),
      withDependencies: prepareDependencies
    )
  }

  /// Creates a registry that makes one observer per key, so that logs, metrics and spans carry
  /// the key.
  ///
  /// ```swift
  /// let carts = StoreRegistry(idleTimeout: .seconds(300), observer: { key in CartLog(key: key) })
  ///   { Cart.State(customer: $0) } reducer: { Cart() }
  /// ```
  ///
  /// The parameters are those of the initializer that takes one observer for every store, but
  /// for `observer`, which makes the observer of each key's store.
  @inlinable
  public convenience init<O: StoreObserver<State, Action>>(
    storage: (any SessionStorage<Key, State>)? = nil,
    owner: String? = nil,
    idleTimeout: Duration? = nil,
    capacity: Int? = nil,
    passivationGracePeriod: Duration = .seconds(10),
    idempotencyWindow: Int = 1_000,
    clock: any Clock<Duration> = ContinuousClock(),
    observer: @escaping @Sendable (Key) -> O,
    registryObserver: (any SessionRegistryObserver)? = nil,
    initialState: @escaping @Sendable (Key) -> State,
    reducer: @escaping @Sendable () -> R,
    withDependencies prepareDependencies: (@Sendable (inout DependencyValues) -> Void)? = nil
  ) {
    self.init(
      storage: storage,
      owner: owner,
      idleTimeout: idleTimeout,
      capacity: capacity,
      passivationGracePeriod: passivationGracePeriod,
      idempotencyWindow: idempotencyWindow,
      clock: clock,
      makeObserver: { observer($0) },
      registryObserver: registryObserver,
      initialState: initialState,
      makeStore: Self.storeMaker(initialState: initialState, reducer: reducer),
      withDependencies: prepareDependencies
    )
  }

  /// Makes a key's store: `(key, stored state, activity, dependencies, observer)`.
  @usableFromInline typealias MakeStore =
    @Sendable (
      Key, State?, SessionActivity, DependencyValues, (any StoreObserver<State, Action>)?
    ) -> Store<State, Action>

  /// The store maker, formed (specialized) in the module that creates the registry.
  @inlinable
  static func storeMaker(
    initialState: @escaping @Sendable (Key) -> State,
    reducer: @escaping @Sendable () -> R
  ) -> MakeStore {
    { key, stored, activity, dependencies, observer in
      let (state, base) = DependencyValues.withValues(dependencies) {
        (stored ?? initialState(key), reducer())
      }
      return Store(
        root: RootCore.make(
          initialState: state,
          reducer: SessionReducer(base: base, activity: activity),
          configuration: StoreConfiguration(dependencies: dependencies),
          observer: nil,
          storeObserver: observer
        )
      )
    }
  }

  @usableFromInline
  init(
    storage: (any SessionStorage<Key, State>)?,
    owner: String?,
    idleTimeout: Duration?,
    capacity: Int?,
    passivationGracePeriod: Duration,
    idempotencyWindow: Int,
    clock: any Clock<Duration>,
    makeObserver: @escaping @Sendable (Key) -> (any StoreObserver<State, Action>)?,
    registryObserver: (any SessionRegistryObserver)?,
    initialState: @escaping @Sendable (Key) -> State,
    makeStore: @escaping MakeStore,
    withDependencies prepareDependencies: (@Sendable (inout DependencyValues) -> Void)?
  ) {
    if let capacity {
      precondition(
        capacity > 0,
        "StoreRegistry(capacity: \(capacity)): the capacity must be at least 1 (nil: no limit)."
      )
    }
    if let idleTimeout {
      precondition(
        idleTimeout > .zero,
        """
        StoreRegistry(idleTimeout: \(idleTimeout)): the idle timeout must be positive \
        (nil: never passivate an idle store).
        """
      )
    }
    precondition(
      passivationGracePeriod >= .zero,
      "StoreRegistry(passivationGracePeriod: \(passivationGracePeriod)): must not be negative."
    )
    precondition(
      idempotencyWindow > 0,
      "StoreRegistry(idempotencyWindow: \(idempotencyWindow)): must be at least 1."
    )
    let owner = owner ?? "registry-\(String(UInt64.random(in: 1...UInt64.max), radix: 36))"
    self.owner = owner
    self.storage = storage
    self.idleTimeout = idleTimeout
    self.capacity = capacity ?? .max
    self.passivationGracePeriod = passivationGracePeriod
    self.idempotencyWindow = idempotencyWindow
    self.clock = clock
    self.sessionClock = SessionClock(
      host: timerHost(for: clock) ?? makeTimerService(clock),
      tracksRecency: capacity != nil
    )
    self.leaseHost = clock is ImmediateClock ? continuousTimers : self.sessionClock.host
    self.makeObserver = makeObserver
    self.registryObserver = registryObserver
    self.measuresSends = registryObserver?.measuresIntervals ?? false
    self.initialState = initialState
    self.makeStore = makeStore
    var dependencies = DependencyValues._inherited()
    prepareDependencies?(&dependencies)
    self.dependencies = dependencies
    if let storage {
      // NB: the commit queue exists before `self` does; it reaches the registry through a
      // handler set once, here (failed saves are rare: a lock per one is nothing).
      let failed = LockIsolated<(@Sendable (Key, UInt64, SaveFailure) -> Void)?>(nil)
      self.commits = GroupCommit(storage: storage, owner: owner, observer: registryObserver) {
        key,
        token,
        failure in
        failed.value?(key, token, failure)
      }
      failed.setValue { [weak self] key, token, failure in
        self?.saveFailed(key, token: token, failure)
      }
    } else {
      self.commits = nil
    }
  }

  deinit {
    let armed = self.guarded.withLock { guarded -> [Entry] in
      guarded.renewal?.cancel()
      return guarded.entries.values.filter(\.isIdleTimerArmed)
    }
    // NB: the clock's queue holds an armed entry (it is its own idle timer), and the entry its
    // store: without this, a registry dropped without `shutdown` kept its stores alive until
    // their idle deadlines.
    for entry in armed { entry.host.disarm(entry) }
  }

  // MARK: - Sending

  /// Sends an action to `key`'s store, activating it first if it is not live.
  ///
  /// The effects the action starts begin on the calling thread once the store has reduced it: each
  /// `.run` runs until its first suspension (or to its end) before this returns, then goes on like
  /// any effect, with the store's task-locals. (From inside an effect, or on a test executor, they
  /// start as ``Store/send(_:fileID:filePath:line:column:)`` starts them.)
  ///
  /// With storage, returns once the state after this action is saved.
  ///
  /// - Parameters:
  ///   - action: The action.
  ///   - key: The session's key.
  /// - Returns: The lifetime of the effects the action started.
  /// - Throws: ``SessionError``.
  @inlinable @discardableResult
  public func send(_ action: Action, to key: Key) async throws -> StoreTask {
    // NB: the common case, specialized in the caller's module: a live key, no storage to wait for.
    if self.storage == nil, !self.measuresSends,
      let store = self.guarded.withLockInlined({ $0.liveStores[key] }),
      let sent = await store.trySendStartingEffectsHere(action)
    {
      sent.starts.start()
      return sent.task
    }
    return try await self.deliver(action, to: key, reading: { _ in () }).task
  }

  /// Sends an action to `key`'s store and reads its state right after the action (and the `.send`
  /// actions it chains) was reduced, before any other action.
  ///
  /// - Parameters:
  ///   - action: The action.
  ///   - key: The session's key.
  ///   - read: Reads a value from the state.
  /// - Returns: The value read.
  /// - Throws: ``SessionError``.
  ///
  /// NB: the common case specialized in the caller's module, as ``send(_:to:)``'s (with `Store`
  /// `final`, so the call to it is direct): unspecialized, every request hashed the key through
  /// the generic `Hashable` witnesses and looked up tuple metadata at run time (the benchmark's
  /// send-and-read row read 3.0-3.5x its floor, 1.65-1.73x since; HTTP handlers call this one).
  @inlinable
  public func send<Value: Sendable>(
    _ action: Action,
    to key: Key,
    reading read: @escaping @Sendable (State) -> Value
  ) async throws -> Value {
    if self.storage == nil, !self.measuresSends,
      let store = self.guarded.withLockInlined({ $0.liveStores[key] }),
      let sent = await store.trySendStartingEffectsHere(action, reading: read)
    {
      sent.starts.start()
      return sent.value
    }
    return try await self.deliver(action, to: key, reading: read).value
  }

  @usableFromInline
  func deliver<Value: Sendable>(
    _ action: Action,
    to key: Key,
    reading read: @escaping @Sendable (State) -> Value
  ) async throws -> (task: StoreTask, value: Value) {
    guard self.measuresSends, let interval = self.registryObserver?.sendStarted(key: "\(key)")
    else { return try await self.deliverUnmeasured(action, to: key, reading: read) }
    return try await self.measuringSend(interval) {
      try await self.deliverUnmeasured(action, to: key, reading: read)
    }
  }

  private func deliverUnmeasured<Value: Sendable>(
    _ action: Action,
    to key: Key,
    reading read: @escaping @Sendable (State) -> Value
  ) async throws -> (task: StoreTask, value: Value) {
    while true {
      let (entry, live) = try await self.liveEntry(for: key)
      guard let store = live else { continue }
      if let sent = try await self.deliver(action, to: entry, store, idempotent: nil, read) {
        return sent
      }
    }
  }

  /// Sends `action` to `entry`'s live `store` and, with storage, waits for its state to be saved.
  ///
  /// - Returns: `nil` when the store had been shut down from outside (send to the next one).
  func deliver<Value: Sendable>(
    _ action: Action,
    to entry: Entry,
    _ store: Store<State, Action>,
    idempotent request: IdempotentRequest?,
    _ read: @escaping @Sendable (State) -> Value
  ) async throws -> (task: StoreTask, value: Value)? {
    let activity = entry.activity
    let window = self.idempotencyWindow
    guard let commits = self.commits else {
      let sent = await store.trySendStartingEffectsHere(action) { state in
        if let request {
          _ = activity.record(
            idempotencyKey: request.key,
            fingerprint: request.fingerprint,
            capacity: window
          )
        }
        return read(state)
      }
      guard let sent else {
        self.storeClosedUnderneath(entry, store)
        return nil
      }
      sent.starts.start()
      return (sent.task, sent.value)
    }
    // NB: counted until its state is saved: a passivation waits for it before its final save
    // and the lease's release (else this save would come after, with a released token).
    self.guarded.withLock { _ in entry.savesInProgress += 1 }
    // NB: the idempotency keys are read right after the action, before any other: the window
    // saved with a state is exactly the keys of the sends that state includes.
    let sent = await store.trySendStartingEffectsHere(action) { state in
      let keys =
        request.map {
          activity.record(idempotencyKey: $0.key, fingerprint: $0.fingerprint, capacity: window)
        } ?? activity.idempotency
      return (read(state), state, activity.version, keys)
    }
    guard let sent else {
      self.saveEnded(entry)
      self.storeClosedUnderneath(entry, store)
      return nil
    }
    sent.starts.start()
    let token = self.guarded.withLock { _ in entry.token }
    let (value, state, version, keys) = sent.value
    do {
      try await commits.commit(
        entry.key,
        state: state,
        version: version,
        token: token,
        idempotency: keys
      )
    } catch {
      self.saveEnded(entry)
      throw error
    }
    self.saveEnded(entry)
    return (sent.task, value)
  }

  /// A send's save ended (or its action was refused); the last one lets a passivation go on.
  private func saveEnded(_ entry: Entry) {
    let waiters = self.guarded.withLock { _ -> [UnsafeContinuation<Void, Never>] in
      entry.savesInProgress -= 1
      guard entry.savesInProgress == 0 else { return [] }
      defer { entry.drainWaiters = [] }
      return entry.drainWaiters
    }
    for waiter in waiters { waiter.resume() }
  }

  /// Waits until no send of `entry` is between its reduce and its save.
  func waitForSaves(of entry: Entry) async {
    await withUnsafeContinuation { (continuation: UnsafeContinuation<Void, Never>) in
      let waiting = self.guarded.withLock { _ -> Bool in
        guard entry.savesInProgress > 0 else { return false }
        entry.drainWaiters.append(continuation)
        return true
      }
      if !waiting { continuation.resume() }
    }
  }
}

/// A timer service for a clock the runtime has none for (one per registry).
private func makeTimerService<C: Clock>(_ clock: C) -> any TimerHost where C.Duration == Duration {
  TimerService(clock: clock)
}

/// How a passivating store ends.
enum Ending {
  /// Gracefully, then its state is saved and its lease released.
  case save
  /// At once, saving nothing (its lease is someone else's).
  case discard
  /// At once, saving nothing (its save failed), then its lease is released.
  case discardAndRelease
  /// At once, then its row is removed from storage.
  case erase
}

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
  private let idleTimeout: Duration?
  private let capacity: Int
  /// How long a passivating store's unmarked effects may run on (also the grace period a
  /// service wrapper gives ``shutdown(gracePeriod:)``).
  public let passivationGracePeriod: Duration
  /// How many idempotency keys each session keeps (its newest ones).
  public let idempotencyWindow: Int
  private let clock: any Clock<Duration>
  let sessionClock: SessionClock
  private let makeObserver: @Sendable (Key) -> (any StoreObserver<State, Action>)?
  /// Watches the registry as a whole (set once, before any session activates).
  let registryObserver: (any SessionRegistryObserver)?
  /// Whether the registry observer measures sends (a tracer): they then leave the fast path.
  @usableFromInline let measuresSends: Bool
  /// Makes a key's store from its state (stored, or `nil` for the initial one): formed in the
  /// module that creates the registry, so the store's per-action path is specialized for its
  /// reducer.
  private let makeStore: MakeStore
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
  /// it held were ~300 B of every session (the bytes-per-session target is 1.5 KB).
  // Safety: `phase`, `token`, `waiters`, `ownershipWasLost`, `saveFailed`, `isErasing`,
  // `idempotentSends` and `isIdleTimerArmed` are read and written only under the registry's
  // lock; the timer's fields as `TimerEntry` says; the rest is
  // immutable (`registry` is written once, in `init`).
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
    /// with many sessions (a probe's send loop over 1,000 keys spent ~10% less CPU without it;
    /// the benchmark's registry rows did not move beyond their noise). Kept in step with the
    /// entries' phases where they change: activation and `beginPassivating`.
    @usableFromInline var liveStores: [Key: Store<State, Action>] = [:]
    var liveCount: Int { self.liveStores.count }
    var isShutDown = false
    /// Where this registry says it is reached (recorded with every lease it takes).
    var advertisedAddress: String?
    /// The owners other instances hold keys under, as activations last learned them.
    var owners: [Key: SessionOwner] = [:]
    var renewal: Task<Void, Never>?
    /// Mutation-testing switch: activation ignores the stored state, as an activation that raced
    /// ahead of the previous store's final save would see an older one.
    var breaksActivation = false
  }

  // MARK: - Creating a registry

  /// Creates a registry whose stores share one observer (or none).
  ///
  /// - Parameters:
  ///   - storage: Where sessions' state and leases live; `nil` keeps them in memory only.
  ///   - owner: The name this registry holds leases under; unique by default. Give each server
  ///     instance its own.
  ///   - idleTimeout: Passivates a store that reduced nothing for this long; `nil`: never.
  ///   - capacity: At most this many live stores; the least recently used passivates first.
  ///     `nil`: no limit.
  ///   - passivationGracePeriod: How long a passivating store's unmarked effects may run on.
  ///   - idempotencyWindow: How many idempotency keys each session keeps, its newest (see
  ///     ``send(_:to:idempotencyKey:reading:)``).
  ///   - clock: Measures idle periods, grace periods and lease renewals (a ``TestClock`` in tests).
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
      if let sent = try await self.deliver(action, to: entry, store, idempotencyKey: nil, read) {
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
    idempotencyKey: String?,
    _ read: @escaping @Sendable (State) -> Value
  ) async throws -> (task: StoreTask, value: Value)? {
    let activity = entry.activity
    let window = self.idempotencyWindow
    guard let commits = self.commits else {
      let sent = await store.trySendStartingEffectsHere(action) { state in
        if let idempotencyKey {
          _ = activity.record(idempotencyKey: idempotencyKey, capacity: window)
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
        idempotencyKey.map { activity.record(idempotencyKey: $0, capacity: window) }
        ?? activity.idempotency
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
  private func waitForSaves(of entry: Entry) async {
    await withUnsafeContinuation { (continuation: UnsafeContinuation<Void, Never>) in
      let waiting = self.guarded.withLock { _ -> Bool in
        guard entry.savesInProgress > 0 else { return false }
        entry.drainWaiters.append(continuation)
        return true
      }
      if !waiting { continuation.resume() }
    }
  }

  /// The state of `key`'s session, activating it if it is not live (with storage: loading it).
  ///
  /// Reading reduces no action: it neither restarts the idle period nor makes the key the most
  /// recently used (activating it does both).
  ///
  /// - Parameter key: The session's key.
  /// - Returns: The state, as of the last action reduced.
  /// - Throws: ``SessionError``.
  ///
  /// NB: a live key's read specialized in the caller's module, as the sends'.
  @inlinable
  public func state(of key: Key) async throws -> State {
    if let store = self.guarded.withLockInlined({ $0.liveStores[key] }) {
      return await store.state
    }
    return try await self.activatedState(of: key)
  }

  @usableFromInline
  func activatedState(of key: Key) async throws -> State {
    let known = try self.guarded.withLock { guarded throws(SessionError) -> Bool in
      guard !guarded.isShutDown else {
        throw .shutDown(key: "\(key)", message: "the registry has shut down; it reads no more")
      }
      return guarded.entries[key] != nil
    }
    if let storage = self.storage, !known {
      // NB: a key never saved reads as its initial state without activating: taking its lease
      // would write a row for every id a client ever asked about.
      let stored: State?
      do {
        stored = try await storage.load(key)
      } catch {
        throw self.loadingFailed(key, error)
      }
      if stored == nil {
        return DependencyValues.withValues(self.dependencies) { self.initialState(key) }
      }
    }
    if let store = try await self.liveEntry(for: key).store { return await store.state }
    return try await self.activatedState(of: key)
  }

  /// The error a send or read throws when loading `key` failed; an unreadable state is also
  /// reported to the key's observer (it needs a person, not a retry).
  func loadingFailed(_ key: Key, _ error: any Error) -> SessionError {
    if let error = error as? SessionError { return error }
    if let unreadable = error as? SessionStateUnreadable {
      let failure = SessionError.stateUnreadable(
        key: "\(key)",
        storedVersion: unreadable.storedVersion,
        message: unreadable.reason
      )
      self.makeObserver(key)?.issueReported(ReportedIssue(failure.description))
      return failure
    }
    self.registryObserver?.storageFailed(key: "\(key)")
    return .storageFailed(
      key: "\(key)",
      message: "loading the session failed: \(error) (\(type(of: error)))"
    )
  }

  /// The live store of `key`, if it is live (not activating, passivating or absent).
  ///
  /// Neither restarts its idle period nor makes it the most recently used.
  public func liveStore(for key: Key) async -> Store<State, Action>? {
    self.guarded.withLock { $0.liveStores[key] }
  }

  /// The store of `key`, activating it if it is not live (with storage: taking its lease and
  /// loading its state), for work that needs the store itself, such as a stream of its states.
  ///
  /// Neither restarts its idle period nor makes it the most recently used.
  ///
  /// - Parameter key: The session's key.
  /// - Returns: The key's live store (it may passivate later, as any live store does).
  /// - Throws: ``SessionError``.
  public func activatedStore(for key: Key) async throws -> Store<State, Action> {
    while true {
      if let store = try await self.liveEntry(for: key).store { return store }
    }
  }

  /// The number of live stores (not counting those activating or passivating).
  public var liveCount: Int {
    self.guarded.withLock { $0.liveCount }
  }

  // MARK: - Activating

  /// The entry of `key` once it is live, and its store as it was read under the lock (`nil` if
  /// the entry stopped being live meanwhile): activates it, or waits for its activation or
  /// passivation to end.
  ///
  /// NB: the store is read here, under the lock, not from the entry afterwards: passivation
  /// changes the entry's phase under the lock, and a read outside it raced that write (TSan).
  func liveEntry(
    for key: Key
  ) async throws -> (entry: Entry, store: Store<State, Action>?) {
    while true {
      let step = try self.guarded.withLock {
        guarded throws(SessionError) -> EntryStep<Entry, Store<State, Action>> in
        guard !guarded.isShutDown else {
          throw .shutDown(
            key: "\(key)",
            message: "the registry has shut down; it takes no more actions"
          )
        }
        if let entry = guarded.entries[key] {
          if case .live(let store) = entry.phase { return .live(entry, store) }
          return .wait(entry)
        }
        let entry = Entry(key: key, clock: self.sessionClock, registry: self)
        guarded.entries[key] = entry
        return .activate(entry)
      }
      switch step {
      case .live(let entry, let store):
        return (entry, store)
      case .wait(let entry):
        await self.waitForChange(of: entry)
      case .activate(let entry):
        try await self.activate(entry)
        return (entry, self.guarded.withLock { _ in entry.liveStore })
      }
    }
  }

  /// Waits until `entry` is live or gone.
  func waitForChange(of entry: Entry) async {
    await withUnsafeContinuation { (continuation: UnsafeContinuation<Void, Never>) in
      let waiting = self.guarded.withLock { guarded -> Bool in
        guard guarded.entries[entry.key] === entry else { return false }
        if case .live = entry.phase { return false }
        entry.waiters.append(continuation)
        return true
      }
      if !waiting { continuation.resume() }
    }
  }

  private func activate(_ entry: Entry) async throws {
    let interval = self.registryObserver?.activationStarted(
      key: "\(entry.key)",
      within: SessionIntervals.send
    )
    guard let interval else { return try await self.activateUnmeasured(entry) }
    do {
      try await self.activateUnmeasured(entry)
      interval.end(error: nil)
    } catch {
      interval.end(error: error)
      throw error
    }
  }

  private func activateUnmeasured(_ entry: Entry) async throws {
    let key = entry.key
    var state: State?
    var token: UInt64 = 0
    var idempotency = IdempotencyRecord()
    if let storage = self.storage {
      do {
        let address = self.guarded.withLock { $0.advertisedAddress }
        switch try await storage.acquire(key, owner: self.owner, address: address) {
        case .acquired(let acquiredToken, let stored, let keys):
          self.forgetOwner(of: key)
          token = acquiredToken
          state = stored
          idempotency = keys
        case .heldBy(let owner, let address, let expiresIn):
          let holder = SessionOwner(name: owner, address: address, leaseLeft: expiresIn)
          self.learn(holder, of: key)
          self.removeFailed(entry)
          throw SessionError.ownershipLost(key: "\(key)", message: holder.refusal)
        }
      } catch let error as SessionError {
        throw error
      } catch {
        self.removeFailed(entry)
        throw self.loadingFailed(key, error)
      }
    }
    entry.activity.restore(idempotency, capacity: self.idempotencyWindow)
    let stale = self.guarded.withLock { $0.breaksActivation }
    let store = self.makeStore(
      key,
      stale ? nil : state,
      entry.activity,
      self.dependencies,
      self.makeObserver(key)
    )
    let (waiters, victims, shutDown) = self.guarded.withLock {
      guarded -> ([UnsafeContinuation<Void, Never>], [Entry], Bool) in
      let waiters = entry.waiters
      entry.waiters = []
      guard !guarded.isShutDown else {
        guarded.entries.removeValue(forKey: key)
        return (waiters, [], true)
      }
      entry.phase = .live(store)
      guarded.liveStores[key] = store
      entry.token = token
      self.registryObserver?.sessionActivated(key: "\(key)")
      self.registryObserver?.liveCountChanged(to: guarded.liveCount)
      var victims: [Entry] = []
      while guarded.liveCount > self.capacity,
        let victim = Self.leastRecentlyUsed(guarded, except: entry)
      {
        self.beginPassivating(victim, in: &guarded, reason: .capacity)
        victims.append(victim)
      }
      return (waiters, victims, false)
    }
    if shutDown {
      await store.shutdown()
      if let storage = self.storage {
        try? await storage.release([SessionLease(key: key, token: token)], owner: self.owner)
      }
      for waiter in waiters { waiter.resume() }
      throw SessionError.shutDown(
        key: "\(key)",
        message: "the registry shut down while the session was activating"
      )
    }
    self.armIdleTimer(entry)
    if self.storage != nil { self.startRenewingLeases() }
    for waiter in waiters { waiter.resume() }
    for victim in victims { Task { _ = await self.finishPassivating(victim) } }
  }

  /// Removes an entry whose activation failed; its waiters try again (and fail the same way, or
  /// succeed if the cause has gone).
  func removeFailed(_ entry: Entry) {
    let waiters = self.guarded.withLock { guarded in
      if guarded.entries[entry.key] === entry { guarded.entries.removeValue(forKey: entry.key) }
      defer { entry.waiters = [] }
      return entry.waiters
    }
    for waiter in waiters { waiter.resume() }
  }

  /// The live entry that reduced an action least recently.
  private static func leastRecentlyUsed(_ guarded: Guarded, except excluded: Entry) -> Entry? {
    var oldest: Entry?
    for entry in guarded.entries.values where entry !== excluded {
      guard case .live = entry.phase else { continue }
      if let current = oldest, current.activity.recency <= entry.activity.recency { continue }
      oldest = entry
    }
    return oldest
  }

  // MARK: - Idle timers

  private func armIdleTimer(_ entry: Entry) {
    guard let idleTimeout = self.idleTimeout else { return }
    self.guarded.withLock { _ in
      // NB: not queued yet: nothing else reads the deadline until `arm` takes the host's lock.
      entry.deadline = entry.activity.lastActive + idleTimeout
      entry.isIdleTimerArmed = true
    }
    entry.host.arm(entry)
  }

  /// Passivates the entry if it has been idle for the whole timeout; otherwise waits for the rest.
  private func idleTimerFired(_ entry: Entry) {
    guard let idleTimeout = self.idleTimeout else { return }
    let host = self.sessionClock.host
    let next = self.guarded.withLock { guarded -> IdleStep in
      guard !guarded.isShutDown, guarded.entries[entry.key] === entry, case .live = entry.phase
      else { return .none }
      let deadline = entry.activity.lastActive + idleTimeout
      if deadline > host.nowOffset {
        entry.deadline = deadline
        return .rearm
      }
      self.beginPassivating(entry, in: &guarded, reason: .idle)
      return .passivate
    }
    switch next {
    case .none: return
    case .rearm: host.arm(entry)
    case .passivate: Task { _ = await self.finishPassivating(entry) }
    }
  }

  // MARK: - Passivating

  /// Passivates `key`'s store: a graceful shutdown (up to the registry's
  /// `passivationGracePeriod`), then, with storage, a save and the lease's release.
  ///
  /// Does nothing if `key` is not live; waits if it is already passivating.
  ///
  /// - Throws: ``SessionError/storageFailed(key:message:)`` if the final save fails.
  public func passivate(_ key: Key) async throws {
    let step = self.guarded.withLock { guarded -> PassivateStep<Entry> in
      guard let entry = guarded.entries[key] else { return .none }
      switch entry.phase {
      case .live:
        self.beginPassivating(entry, in: &guarded, reason: .explicit)
        return .passivate(entry)
      case .passivating: return .wait(entry)
      case .activating: return .none
      }
    }
    switch step {
    case .passivate(let entry):
      if let failure = await self.finishPassivating(entry) { throw failure }
    case .wait(let entry):
      await self.waitForChange(of: entry)
    case .none:
      return
    }
  }

  /// Marks a live entry passivating (under the lock): it is no longer live.
  func beginPassivating(_ entry: Entry, in guarded: inout Guarded, reason: PassivationReason) {
    guard case .live(let store) = entry.phase else { return }
    entry.phase = .passivating(store)
    guarded.liveStores.removeValue(forKey: entry.key)
    self.registryObserver?.sessionPassivated(key: "\(entry.key)", reason: reason)
    self.registryObserver?.liveCountChanged(to: guarded.liveCount)
  }

  /// Shuts a passivating entry's store down, saves its state and releases its lease, then lets
  /// the sends waiting for it through (to a new activation).
  ///
  /// A store whose lease was lost, or whose save failed, shuts down at once and saves nothing:
  /// its state is not (or no longer) what storage holds. An erased one then removes its row.
  func finishPassivating(
    _ entry: Entry,
    gracePeriod: Duration? = nil
  ) async
    -> SessionError?
  {
    let (store, armed, token, ending) = self.guarded.withLock {
      _ -> (Store<State, Action>?, Bool, UInt64, Ending) in
      guard case .passivating(let store) = entry.phase else { return (nil, false, 0, .discard) }
      defer { entry.isIdleTimerArmed = false }
      return (store, entry.isIdleTimerArmed, entry.token, entry.ending)
    }
    guard let store else { return nil }
    if armed { entry.host.disarm(entry) }
    var failure: SessionError?
    if ending != .save {
      await store.shutdown()
      if let storage = self.storage {
        // NB: the sends reduced before the shutdown end first (their saves fail: the group commit
        // refuses this lease's states once one failed), so nothing of this store is saved after.
        await self.waitForSaves(of: entry)
        if ending == .erase {
          failure = await self.eraseStored(entry.key, token: token, in: storage)
        } else if ending == .discardAndRelease {
          try? await storage.release(
            [SessionLease(key: entry.key, token: token)],
            owner: self.owner
          )
        }
      }
    } else {
      await store.shutdown(
        gracePeriod: gracePeriod ?? self.passivationGracePeriod,
        clock: self.clock
      )
      if let storage = self.storage, let commits = self.commits {
        await self.waitForSaves(of: entry)
        let state = await store.state
        do {
          try await commits.commit(
            entry.key,
            state: state,
            version: entry.activity.version,
            token: token,
            idempotency: entry.activity.idempotency
          )
          try await storage.release([SessionLease(key: entry.key, token: token)], owner: self.owner)
        } catch let error as SessionError {
          failure = error
        } catch {
          failure = .storageFailed(
            key: "\(entry.key)",
            message: "releasing the session's lease failed: \(error) (\(type(of: error)))"
          )
        }
      }
    }
    self.commits?.forget(entry.key)
    let waiters = self.guarded.withLock { guarded in
      if guarded.entries[entry.key] === entry { guarded.entries.removeValue(forKey: entry.key) }
      defer { entry.waiters = [] }
      return entry.waiters
    }
    for waiter in waiters { waiter.resume() }
    return failure
  }

  /// A store the registry considers live refused an action: it was shut down from outside.
  ///
  /// (By a holder of ``liveStore(for:)``.) Passivates the entry so the next send gets a new store.
  private func storeClosedUnderneath(_ entry: Entry, _ store: Store<State, Action>) {
    let passivate = self.guarded.withLock { guarded -> Bool in
      guard case .live(let live) = entry.phase, live === store else { return false }
      self.beginPassivating(entry, in: &guarded, reason: .explicit)
      return true
    }
    if passivate { Task { _ = await self.finishPassivating(entry) } }
  }

  // MARK: - Ownership

  /// A save or a renewal found that another owner holds `key`'s lease, or storage refused or
  /// failed its save: shut its store down (no save), so pending and later sends fail, go to the
  /// owner, or (a failed save) reactivate from the last saved state.
  private func saveFailed(_ key: Key, token: UInt64, _ failure: SaveFailure) {
    let entry = self.guarded.withLock { guarded -> Entry? in
      guard let entry = guarded.entries[key], entry.token == token else { return nil }
      switch failure {
      case .ownershipLost:
        entry.ownershipWasLost = true
        self.registryObserver?.ownershipLost(key: "\(key)")
      case .refused:
        entry.saveFailed = true
        self.registryObserver?.storageFailed(key: "\(key)")
      }
      guard case .live = entry.phase else { return nil }
      self.beginPassivating(entry, in: &guarded, reason: .discarded)
      return entry
    }
    if let entry { Task { _ = await self.finishPassivating(entry) } }
  }

  private func startRenewingLeases() {
    guard let storage = self.storage else { return }
    let start = self.guarded.withLock { guarded -> Bool in
      guard guarded.renewal == nil, !guarded.isShutDown else { return false }
      guarded.renewal = Task { [weak self, clock] in
        let interval = storage.leaseDuration / 3
        while !Task.isCancelled {
          do { try await clock.sleep(for: interval) } catch { return }
          guard let self else { return }
          await self.renewLeases()
        }
      }
      return true
    }
    _ = start
  }

  /// Renews the leases of every live or passivating key.
  private func renewLeases() async {
    guard let storage = self.storage else { return }
    let leases = self.guarded.withLock { guarded in
      guarded.entries.values.compactMap { entry -> SessionLease<Key>? in
        if case .activating = entry.phase { return nil }
        return SessionLease(key: entry.key, token: entry.token)
      }
    }
    guard !leases.isEmpty else { return }
    guard let lost = try? await storage.renew(leases, owner: self.owner) else { return }
    let tokens = Dictionary(leases.map { ($0.key, $0.token) }, uniquingKeysWith: { $1 })
    for key in lost {
      if let token = tokens[key] {
        self.saveFailed(key, token: token, .ownershipLost(currentOwner: nil))
      }
    }
  }

  // MARK: - Shutting down

  /// Passivates every live store, concurrently, and takes no more actions.
  ///
  /// Each store shuts down gracefully within `gracePeriod` (marked effects are cancelled at once),
  /// then, with storage, saves and releases its lease. A save that fails is reported as an issue
  /// naming the key and the error. Later sends throw ``SessionError/shutDown(key:message:)``.
  ///
  /// - Parameter gracePeriod: How long each store's unmarked effects may run on.
  public func shutdown(gracePeriod: Duration) async {
    let (live, busy, renewal) = self.guarded.withLock {
      guarded -> ([Entry], [Entry], Task<Void, Never>?) in
      guarded.isShutDown = true
      var live: [Entry] = []
      var busy: [Entry] = []
      for entry in guarded.entries.values {
        if case .live = entry.phase {
          self.beginPassivating(entry, in: &guarded, reason: .shutdown)
          live.append(entry)
        } else {
          busy.append(entry)
        }
      }
      defer { guarded.renewal = nil }
      return (live, busy, guarded.renewal)
    }
    renewal?.cancel()
    await withTaskGroup(of: Void.self) { group in
      for entry in live {
        group.addTask {
          if let failure = await self.finishPassivating(entry, gracePeriod: gracePeriod) {
            reportIssue(
              """
              Shutting down the session '\(entry.key)' did not save its state.

                \(failure)
              """
            )
          }
        }
      }
    }
    for entry in busy { await self.waitUntilGone(entry) }
  }

  /// Waits until `entry` has left the registry.
  private func waitUntilGone(_ entry: Entry) async {
    while self.guarded.withLock({ $0.entries[entry.key] === entry }) {
      await self.waitForChange(of: entry)
      if case .live = self.guarded.withLock({ _ in entry.phase }) { return }
    }
  }

  /// Breaks activation on purpose (the race test's mutation check).
  package func breakActivationForMutationTest() {
    self.guarded.withLock { $0.breaksActivation = true }
  }

  /// Suspends until `count` sends wait for the next group commit (tests of batching).
  package func waitUntilSavesQueued(_ count: Int) async {
    await self.commits?.waitUntilQueued(count)
  }

  /// What this registry's saves carried so far (zero without storage).
  public var saveStatistics: SaveStatistics {
    self.commits?.statistics ?? SaveStatistics()
  }

  /// Whether ``shutdown(gracePeriod:)`` was called.
  public var isShutDown: Bool {
    self.guarded.withLock { $0.isShutDown }
  }
}

/// A timer service for a clock the runtime has none for (one per registry).
private func makeTimerService<C: Clock>(_ clock: C) -> any TimerHost where C.Duration == Duration {
  TimerService(clock: clock)
}

/// What a send does with the entry it found.
private enum EntryStep<Entry, Store> {
  case live(Entry, Store)
  case wait(Entry)
  case activate(Entry)
}

/// What a fired idle timer does.
private enum IdleStep {
  case none
  case rearm
  case passivate
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

/// What `passivate(_:)` does.
private enum PassivateStep<Entry> {
  case passivate(Entry)
  case wait(Entry)
  case none
}

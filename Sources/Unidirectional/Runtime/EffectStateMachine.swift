/// The effect bookkeeping of one root store, as a value: which units of effect work exist, which
/// cancellation identifiers and lifetimes they belong to, how many effect tasks are alive, who
/// waits for what, and whether the store has shut down.
///
/// Every method is a transition: it changes the state and returns what the caller must do once it
/// has released the lock that guards the machine (resume these waiters, cancel these tasks, run
/// these jobs). The machine itself never resumes, cancels, locks or allocates tasks, so
/// `EffectStateMachineTests` drive every transition, valid and invalid, without tasks.
///
/// It is generic over what it stores but never touches: the jobs effect tasks run, the
/// continuations of waiting tasks, and the handles of running tasks.
struct EffectStateMachine<Job, Waiter, Slot: UnitSlot> {
  /// Whether the store takes new effects.
  enum Phase: Equatable {
    /// New jobs get tasks.
    case open
    /// Shut down: jobs are abandoned and new effects are born cancelled.
    case shutDown
  }

  // NB: the stored state is internal only for the machine's own files (`EffectStateMachine+*`).
  // The order packs the small fields into the maps' trailing padding: the machine is inline in
  // every store with an effect, and each word counts against the 1 KB armed store. `SmallMap`s:
  // a store with one live effect (a connection's timer) allocates none of them.
  var effects = SmallMap<EffectID, EffectRecord>()
  private(set) var phase = Phase.open
  /// Mutation-testing switch (`StoreConfiguration.cancelsTimers`): `false` makes cancellation by
  /// identifier skip armed timers, so they fire as if never cancelled.
  var cancelsTimers = true
  /// Whether ``Ended`` was handed out: the one signal that everything ended after shutdown.
  private var hasEnded = false
  var registry = SmallMap<CancelKey, EffectIDs>()
  /// ``liveJobs``, in 4 bytes.
  private var liveJobCount: Int32 = 0
  var lifetimes = SmallMap<LifetimeID, LifetimeRecord>()
  /// Tasks started for jobs (``submit(_:)``) that have not ended (``jobEnded()``).
  var liveJobs: Int { Int(self.liveJobCount) }
  /// What few stores use, behind one pointer (inline, 64 B of every store with an effect).
  var occasional = OutOfLine<Occasional>()
  /// The first of the listed units (``UnitFlags/startsUnlocked``).
  ///
  /// They are the `.run`s with no identifier that reducers return, linked through their
  /// ``RunUnit/next`` and ``RunUnit/previous``. The list holds one retain of each.
  ///
  /// NB: a list, not records in ``effects``: a session's store keeps its idle timer there, and
  /// every request's `.run` took that map from one entry (inline) to two (an array allocated and
  /// freed) and back, with a record moved in and out, and a trip to the lock to start it.
  var runs: Unmanaged<RunUnit>?

  /// The machine's rarely used fields (``occasional``).
  struct Occasional: EmptyInitializable {
    /// What started each lifetime, for test diagnostics (only when the store records origins).
    var origins: [LifetimeID: EffectOrigin] = [:]
    var idleWaiters: [Int: Waiter] = [:]
    var nextIdleWaiter = 0
    var throttles = ThrottleTable()
    var debounces = DebounceTimers()
    var queues = OrderedQueues<Waiter>()
    /// The tasks of listed units parked in `finish` until their cancellers are done.
    var listedFinishWaiters: [EffectID: Waiter] = [:]
  }

  // NB: reads of an unallocated `occasional` build no box and no value; writes allocate it once,
  // so hot paths check `isEmpty` before they write.
  var origins: [LifetimeID: EffectOrigin] {
    get { self.occasional.read({ $0.origins }, unallocated: .init()) }
    _modify { yield &self.occasional.value.origins }
  }
  private var idleWaiters: [Int: Waiter] {
    get { self.occasional.read({ $0.idleWaiters }, unallocated: .init()) }
    _modify { yield &self.occasional.value.idleWaiters }
  }
  private var nextIdleWaiter: Int {
    get { self.occasional.read({ $0.nextIdleWaiter }, unallocated: 0) }
    _modify { yield &self.occasional.value.nextIdleWaiter }
  }
  /// The store's throttles: a concern of its own, kept here for its lock and its box.
  var throttles: ThrottleTable {
    get { self.occasional.read({ $0.throttles }, unallocated: .init()) }
    _modify { yield &self.occasional.value.throttles }
  }
  /// The store's debounce timers, as ``throttles``.
  var debounces: DebounceTimers {
    get { self.occasional.read({ $0.debounces }, unallocated: .init()) }
    _modify { yield &self.occasional.value.debounces }
  }
  /// The store's ordered queues, as ``throttles``.
  var queues: OrderedQueues<Waiter> {
    get { self.occasional.read({ $0.queues }, unallocated: .init()) }
    _modify { yield &self.occasional.value.queues }
  }

  /// ``DebounceTimers/rearm(_:deadline:body:)``, allocating nothing in a store with no timers.
  mutating func rearmDebounce(_ key: CancelKey, deadline: any Sendable, body: any Sendable) -> Bool
  {
    guard self.occasional.read({ !$0.debounces.isEmpty }, unallocated: false) else { return false }
    return self.occasional.value.debounces.rearm(key, deadline: deadline, body: body)
  }

  /// One unit of effect work that has not finished.
  ///
  /// NB: its lifetime is its unit's (``EffectUnit/lifetime``), not a field: every store with an
  /// effect holds one record inline, and every 8 B of it counts against the 1 KB armed store.
  struct EffectRecord {
    let unit: any EffectUnit
    let keys: CancelKeys
    var phase: UnitPhase = .pending
    /// The effect's task, parked in `finish` until `pins` is back to zero.
    var finishWaiter: Waiter?
    /// Cancellers between reading the slot and calling `cancel()` on it (32 bits, last: the
    /// record is 8 B smaller).
    var pins: UInt32 = 0
  }

  enum UnitPhase {
    case pending
    case running(Slot)
  }

  /// The unfinished effects of one ``StoreTask``.
  ///
  /// NB: the 9-byte set last: in the other order, padding made every store's inline record 8 B
  /// larger.
  struct LifetimeRecord {
    /// The lifetime's first unit, which stands for it.
    var owner: LifetimeOwner
    var waiters = Resumptions<Waiter>()
    var effects = EffectIDs.none

    init(owner: any EffectUnit) {
      self.owner = LifetimeOwner(owner)
    }
  }

  // MARK: - Registering

  /// Registers a unit of work under `keys` in its lifetime, before it can run.
  ///
  /// A unit joining a cancelled lifetime, or a store that has shut down, is born cancelled and
  /// finished: its job will find nothing to run.
  mutating func register(_ unit: any EffectUnit, keys: CancelKeys) {
    let lifetime = unit.lifetime
    if lifetime.isLifetimeCancelled || self.phase == .shutDown {
      unit.markCancelled()
      unit.markFinished()
      return
    }
    let id = unit.id
    // NB: no `dict[key]?.field = ...` or `dict[key, default:]` mutations in this type: their
    // `_modify` coroutines allocate their frames on the heap for values this size (the effect-
    // start allocation gate sees them). Mutate through `SmallMap.update` instead.
    let lifetimeID = LifetimeID(lifetime)
    if unit.loadFlags() & UnitFlags.startsUnlocked != 0 {
      precondition(keys.isEmpty, "A listed effect unit was registered under identifiers.")
      self.link(unsafeDowncast(unit as AnyObject, to: RunUnit.self))
    } else {
      self.effects.insert(EffectRecord(unit: unit, keys: keys), forKey: id)
    }
    if self.lifetimes.update(lifetimeID, { $0.effects.insert(id) }) == nil {
      var record = LifetimeRecord(owner: lifetime)
      record.effects.insert(id)
      self.lifetimes.insert(record, forKey: lifetimeID)
    }
    for key in keys {
      if self.registry.update(key, { $0.insert(id) }) == nil {
        self.registry.insert(.one(id), forKey: key)
      }
    }
  }

  // MARK: - Effect tasks

  /// What the caller of ``submit(_:)`` must do with the jobs.
  enum Submission {
    /// Start one task per job; each calls ``jobEnded()`` when it ends.
    case run
    /// The store has shut down: finish the jobs' units without running them.
    case abandon
  }

  /// Counts a task per job about to start, unless the store has shut down.
  mutating func submit(_ jobs: [Job]) -> Submission {
    guard self.phase == .open else { return .abandon }
    self.liveJobCount += Int32(jobs.count)
    return .run
  }

  /// What the caller of ``jobEnded()`` must do.
  struct JobEnd {
    /// Waiters of ``waitUntilIdle(_:ticket:cancelled:)`` to resume.
    var resumptions = Resumptions<Waiter>()
    /// The last task ended after shutdown: let go of what effects needed (handed out once).
    var ended = false
  }

  /// The task of a job has ended: its units have all finished.
  mutating func jobEnded() -> JobEnd {
    precondition(self.liveJobCount > 0, "A job ended that was never submitted.")
    self.liveJobCount -= 1
    var end = JobEnd()
    if self.isIdle { end.resumptions = self.takeIdleWaiters() }
    end.ended = self.takeEnded()
    return end
  }

  /// No unit is live and no effect task is alive.
  var isIdle: Bool { self.effects.isEmpty && self.runs == nil && self.liveJobs == 0 }

  private mutating func takeIdleWaiters() -> Resumptions<Waiter> {
    var resumptions = Resumptions<Waiter>()
    guard !self.idleWaiters.isEmpty else { return resumptions }
    resumptions.append(contentsOf: self.idleWaiters.values)
    self.idleWaiters = [:]
    return resumptions
  }

  /// `true` once: when the store has shut down and every effect task has ended.
  private mutating func takeEnded() -> Bool {
    guard self.phase == .shutDown, self.isIdle, !self.hasEnded else { return false }
    self.hasEnded = true
    return true
  }

  // MARK: - Running and finishing

  /// Whether the task about to run unit `id` should run it.
  ///
  /// A unit that was cancelled (and so finished) before it started, or whose store shut down, does
  /// not run.
  mutating func start(_ id: EffectID, in slot: Slot) -> Start {
    guard self.phase != .shutDown else {
      guard let unit = self.effects.update(id, { $0.unit }) else { return .skip(Resumptions()) }
      unit.markCancelled()
      return .skip(self.remove(id))
    }
    // NB: one access to the record: every `.run` starts here.
    guard self.effects.update(id, { $0.phase = .running(slot) }) != nil else {
      return .skip(Resumptions())
    }
    return .run
  }

  enum Start {
    case run
    /// Do not run; resume these waiters.
    case skip(Resumptions<Waiter>)
  }

  /// Called by the task that ran unit `id`, after its work returned.
  mutating func finish(_ id: EffectID) -> Finish {
    guard let pins = self.effects.update(id, { $0.pins }) else { return .finished(Resumptions()) }
    if pins > 0 { return .waitForCancellers }
    return .finished(self.remove(id))
  }

  /// Finishes a unit whose job will never run it (the job was abandoned at shutdown, or it never
  /// reached its turn).
  ///
  /// A unit that is not pending is left alone.
  mutating func abandon(_ id: EffectID) -> Resumptions<Waiter> {
    guard let record = self.effects[id], case .pending = record.phase else {
      return Resumptions()
    }
    record.unit.markCancelled()
    return self.remove(id)
  }

  enum Finish {
    /// The unit is finished; resume these waiters.
    case finished(Resumptions<Waiter>)
    /// Another thread is cancelling the task: park with ``parkFinishing(_:waiter:)`` and call
    /// ``finish(_:)`` again when resumed.
    case waitForCancellers
  }

  /// Parks the finishing task until its cancellers are done; returns the waiter when they already
  /// are.
  mutating func parkFinishing(_ id: EffectID, waiter: Waiter) -> Waiter? {
    let parked = self.effects.update(id) { record -> Bool in
      guard record.pins > 0 else { return false }
      record.finishWaiter = waiter
      return true
    }
    return parked == true ? nil : waiter
  }

  /// Removes a unit: from its identifiers, its lifetime, and the live count.
  private mutating func remove(_ id: EffectID) -> Resumptions<Waiter> {
    var resumptions = Resumptions<Waiter>()
    guard let record = self.effects.removeValue(forKey: id) else { return resumptions }
    record.unit.markFinished()
    for key in record.keys where self.registry.update(key, { $0.remove(id) }) == true {
      self.registry.removeValue(forKey: key)
    }
    self.leaveLifetime(id, of: record.unit.lifetime, into: &resumptions)
    return resumptions
  }

  /// Takes a finished unit out of its lifetime (which finishes with its last unit), and wakes
  /// the idle waiters if it was the last unit.
  mutating func leaveLifetime(
    _ id: EffectID,
    of lifetime: any EffectUnit,
    into resumptions: inout Resumptions<Waiter>
  ) {
    let lifetimeID = LifetimeID(lifetime)
    if self.lifetimes.update(lifetimeID, { $0.effects.remove(id) }) == true,
      let lifetime = self.lifetimes.removeValue(forKey: lifetimeID)
    {
      resumptions.append(contentsOf: lifetime.waiters)
      if !self.origins.isEmpty { self.origins.removeValue(forKey: lifetimeID) }
    }
    if self.isIdle { resumptions.append(contentsOf: self.takeIdleWaiters()) }
  }

  // MARK: - Cancelling

  /// What the caller of a cancellation must do: cancel the running tasks (then ``unpin(_:)`` them)
  /// and resume the waiters of units that finished without running.
  struct Cancellation {
    var tasks: [(EffectID, Slot)] = []
    /// Running listed units whose tasks to cancel (then ``unpinListed(_:)``).
    var listedTasks: [(RunUnit, Slot)] = []
    var resumptions = Resumptions<Waiter>()
    /// Armed timers to take out of their hosts' queues.
    var timers = Resumptions<TimerEntry>()
  }

  /// Cancels every unit registered under any of `keys`.
  ///
  /// Unknown keys do nothing.
  mutating func cancel(_ keys: [CancelKey]) -> Cancellation {
    self.cancel(CancelKeys(keys))
  }

  /// Cancels every unit registered under any of `keys`.
  ///
  /// Unknown keys do nothing.
  mutating func cancel(_ keys: CancelKeys) -> Cancellation {
    var cancellation = Cancellation()
    let hasDebounces = !self.debounces.isEmpty
    for key in keys {
      if hasDebounces { self.debounces.cancel(key) }
      guard let ids = self.registry[key] else { continue }
      for id in ids {
        if !self.cancelsTimers, (self.effects[id]?.unit.loadFlags() ?? 0) & UnitFlags.timer != 0 {
          continue
        }
        self.cancel(id, into: &cancellation)
      }
    }
    return cancellation
  }

  /// Cancels every unit marked ``UnitFlags/cancelledOnShutdown`` (a graceful shutdown began).
  mutating func cancelMarkedForShutdown() -> Cancellation {
    var cancellation = Cancellation()
    let marked = self.effects.keys.filter { id in
      (self.effects[id]?.unit.loadFlags() ?? 0) & UnitFlags.cancelledOnShutdown != 0
    }
    for id in marked { self.cancel(id, into: &cancellation) }
    for unit in self.listedUnits
    where unit.loadFlags() & UnitFlags.cancelledOnShutdown != 0 {
      self.cancelListed(unit, into: &cancellation)
    }
    return cancellation
  }

  /// Cancels every unit of a lifetime, and makes units that join it later born cancelled.
  mutating func cancel(lifetime: any EffectUnit) -> Cancellation {
    lifetime.markLifetimeCancelled()
    var cancellation = Cancellation()
    guard let record = self.lifetimes[LifetimeID(lifetime)] else { return cancellation }
    for id in record.effects {
      if self.effects.contains(id) {
        self.cancel(id, into: &cancellation)
      } else {
        self.cancelListed(self.listedUnit(id), into: &cancellation)
      }
    }
    return cancellation
  }

  /// Cancels every unit of every lifetime (the store stays open).
  mutating func cancelAll() -> Cancellation {
    var cancellation = Cancellation()
    if !self.debounces.isEmpty { self.debounces.cancelAll() }
    for lifetime in self.lifetimes.values.map(\.owner.unit) {
      lifetime.markLifetimeCancelled()
    }
    for id in self.effects.keys { self.cancel(id, into: &cancellation) }
    for unit in self.listedUnits { self.cancelListed(unit, into: &cancellation) }
    return cancellation
  }

  private mutating func cancel(_ id: EffectID, into cancellation: inout Cancellation) {
    // NB: read and marked in place: copying the record out (`self.effects[id]`) retained and
    // released everything it holds, on every cancelled timer.
    let found = self.effects.update(id) { record -> CancelledUnit? in
      guard !record.unit.isCancelled else { return nil }
      record.unit.markCancelled()
      switch record.phase {
      case .pending:
        guard record.unit.loadFlags() & UnitFlags.timer != 0 else { return .pending(timer: nil) }
        return .pending(timer: unsafeDowncast(record.unit, to: TimerEntry.self))
      case .running(let slot):
        record.pins += 1
        return .running(slot)
      }
    }
    guard let cancelled = found ?? nil else { return }
    if !self.debounces.isEmpty, let keys = self.effects[id]?.keys {
      self.debounces.stopRearming(keys)
    }
    switch cancelled {
    case .pending(let timer):
      // Never started: it is finished now, and its job will find nothing to run (a timer is
      // disarmed).
      if let timer { cancellation.timers.append(timer) }
      cancellation.resumptions.append(contentsOf: self.remove(id))
    case .running(let slot):
      cancellation.tasks.append((id, slot))
    }
  }

  /// What cancelling one unit found: a unit that never started (and, if it is an armed timer,
  /// the timer to disarm), or a running one (pinned) and its task.
  private enum CancelledUnit {
    case pending(timer: TimerEntry?)
    case running(Slot)
  }

  /// Releases the pins a cancellation took; returns the finishing tasks to resume.
  mutating func unpin(_ ids: [EffectID]) -> Resumptions<Waiter> {
    var resumptions = Resumptions<Waiter>()
    for id in ids {
      let waiter = self.effects.update(id) { record -> Waiter? in
        record.pins -= 1
        guard record.pins == 0, let waiter = record.finishWaiter else { return nil }
        record.finishWaiter = nil
        return waiter
      }
      if let waiter = waiter ?? nil { resumptions.append(waiter) }
    }
    return resumptions
  }

  /// Releases the pins a cancellation took on listed units; returns the finishing tasks to
  /// resume.
  mutating func unpinListed(_ units: [RunUnit]) -> Resumptions<Waiter> {
    var resumptions = Resumptions<Waiter>()
    for unit in units where unit.pins > 0 {
      unit.pins -= 1
      if unit.pins == 0,
        !self.occasional.read({ $0.listedFinishWaiters.isEmpty }, unallocated: true),
        let waiter = self.occasional.value.listedFinishWaiters.removeValue(forKey: unit.id)
      {
        resumptions.append(waiter)
      }
    }
    return resumptions
  }

  // MARK: - Waiting

  /// Waits for every unit of `lifetime` to finish; returns the waiter when there is nothing to wait
  /// for.
  mutating func wait(for lifetime: any EffectUnit, _ waiter: Waiter) -> Waiter? {
    let waiting: Void? = self.lifetimes.update(LifetimeID(lifetime)) { $0.waiters.append(waiter) }
    return waiting == nil ? waiter : nil
  }

  func isFinished(_ lifetime: any EffectUnit) -> Bool {
    self.lifetimes[LifetimeID(lifetime)] == nil
  }

  /// A ticket for ``waitUntilIdle(_:ticket:)``, so the wait can be abandoned.
  mutating func makeIdleTicket() -> Int {
    defer { self.nextIdleWaiter += 1 }
    return self.nextIdleWaiter
  }

  /// Waits until no unit is live and no effect task alive; returns the waiter when that is so
  /// already (or `cancelled` is true).
  mutating func waitUntilIdle(_ waiter: Waiter, ticket: Int, cancelled: Bool) -> Waiter? {
    if self.isIdle || cancelled { return waiter }
    self.idleWaiters[ticket] = waiter
    return nil
  }

  /// Abandons an idle wait; returns its waiter if it was still waiting.
  mutating func abandonIdleWait(ticket: Int) -> Waiter? {
    self.idleWaiters.removeValue(forKey: ticket)
  }

  // MARK: - Shutting down

  /// What the caller of ``shutDown()`` must do.
  struct ShutDown {
    /// Running units whose tasks to cancel (then ``unpin(_:)``).
    var cancellation = Cancellation()
    /// No effect task is alive: let go of what effects needed now (no task will say so later).
    var ended = false
  }

  /// Stops accepting work and cancels every unit; tasks already started end on their own.
  ///
  /// Shutting down twice does nothing more.
  mutating func shutDown() -> ShutDown {
    guard self.phase != .shutDown else { return ShutDown() }
    self.phase = .shutDown
    var result = ShutDown()
    result.cancellation = self.cancelAll()
    result.ended = self.takeEnded()
    return result
  }

  // MARK: - Introspection

  /// The unit running in the slot `matches` picks (a linear search: failure reports only).
  func runningUnit(where matches: (Slot) -> Bool) -> EffectID? {
    for (id, record) in self.effects.entries {
      if case .running(let slot) = record.phase, matches(slot) { return id }
    }
    for unit in self.listedUnits {
      if let slot = Self.runningSlot(of: unit), matches(slot) { return unit.id }
    }
    return nil
  }

  /// Whether a unit of `lifetime` is running in a task `matches` recognizes.
  func lifetime(_ lifetime: any EffectUnit, hasUnitRunningWhere matches: (Slot) -> Bool) -> Bool {
    guard let record = self.lifetimes[LifetimeID(lifetime)] else { return false }
    for id in record.effects {
      if let unit = self.effects[id] {
        if case .running(let slot) = unit.phase, matches(slot) { return true }
      } else if let slot = Self.runningSlot(of: self.listedUnit(id)), matches(slot) {
        return true
      }
    }
    return false
  }

  /// The unit registered as `id`, if it has not finished.
  func unit(_ id: EffectID) -> (any EffectUnit)? {
    self.effects[id]?.unit ?? self.listedUnits.first { $0.id == id }
  }

  /// The unfinished units under one identifier.
  func units(under key: CancelKey) -> [any EffectUnit] {
    guard let ids = self.registry[key] else { return [] }
    return ids.compactMap { self.effects[$0]?.unit }
  }

  /// Units registered and not finished.
  var liveCount: Int { self.effects.count + self.listedUnits.count }

  /// Identifiers with at least one unfinished unit.
  var registeredIdentifierCount: Int { self.registry.count }

  /// The units under one identifier.
  func count(under key: CancelKey) -> Int { self.registry[key]?.count ?? 0 }

  /// The origins of the lifetimes with unfinished units, in the order they were sent.
  var unfinishedOrigins: [EffectOrigin] {
    self.origins.values.sorted { $0.sequence < $1.sequence }
  }
}

extension EffectStateMachine: Sendable where Job: Sendable, Waiter: Sendable, Slot: Sendable {}
extension EffectStateMachine.EffectRecord: Sendable
where Job: Sendable, Waiter: Sendable, Slot: Sendable {}
extension EffectStateMachine.UnitPhase: Sendable
where Job: Sendable, Waiter: Sendable, Slot: Sendable {}
extension EffectStateMachine.LifetimeRecord: Sendable
where Job: Sendable, Waiter: Sendable, Slot: Sendable {}
extension EffectStateMachine.Occasional: Sendable
where Job: Sendable, Waiter: Sendable, Slot: Sendable {}

extension StoreRegistry {
  /// Sends an action to `key`'s store at most once per `idempotencyKey`: a retry of a send the
  /// session already applied is not reduced again.
  ///
  /// For a client that got no answer (a timeout, a crash, a 503) and retries: a failed send may
  /// already be applied. The key is saved with the session's state in the same write, so this
  /// holds across a crash and across instances sharing the storage. Each session keeps its last
  /// `idempotencyWindow` keys. A key names a request: a retry under a key the session holds
  /// returns without looking at its action (``send(_:to:idempotencyKey:fingerprint:)`` looks).
  ///
  /// - Parameters:
  ///   - action: The action.
  ///   - key: The session's key.
  ///   - idempotencyKey: The request's key, chosen by the client (unique per request).
  /// - Returns: The lifetime of the effects the action started (for a retry, one already ended).
  /// - Throws: ``SessionError``; a send that throws may be retried with the same key.
  @discardableResult
  public func send(_ action: Action, to key: Key, idempotencyKey: String) async throws -> StoreTask
  {
    let request = IdempotentRequest(key: idempotencyKey, fingerprint: 0)
    return try await self.send(action, to: key, request) { _ in () }.task
  }

  /// Sends an action at most once per `idempotencyKey` (see ``send(_:to:idempotencyKey:)``) and
  /// reads the state: right after the action, or, for a retry of a send already applied, as it
  /// is once that send's state is saved.
  ///
  /// - Parameters:
  ///   - action: The action.
  ///   - key: The session's key.
  ///   - idempotencyKey: The request's key, chosen by the client (unique per request).
  ///   - read: Reads a value from the state.
  /// - Returns: The value read.
  /// - Throws: ``SessionError``; a send that throws may be retried with the same key.
  public func send<Value: Sendable>(
    _ action: Action,
    to key: Key,
    idempotencyKey: String,
    reading read: @escaping @Sendable (State) -> Value
  ) async throws -> Value {
    let request = IdempotentRequest(key: idempotencyKey, fingerprint: 0)
    return try await self.send(action, to: key, request, read).value
  }

  /// Sends an action at most once per `idempotencyKey`, and refuses the key's reuse for another
  /// request: a retry whose `fingerprint` differs from the one the key was first sent with throws
  /// ``IdempotencyKeyReused`` and is not reduced.
  ///
  /// As the IETF draft *The Idempotency-Key HTTP Header Field* (and Stripe) have it: a client that
  /// sends a new request under an old key has a bug, and answering it as a retry would drop the
  /// request in silence. The fingerprint is the caller's summary of the request, stable across
  /// processes and versions: a server passes its method, path and body as it decoded them. It is
  /// saved (as a 32-bit digest) with the key, so the check holds across a crash and across
  /// instances. A key first sent without a fingerprint is answered as a retry whatever comes with
  /// it later.
  ///
  /// - Parameters:
  ///   - action: The action.
  ///   - key: The session's key.
  ///   - idempotencyKey: The request's key, chosen by the client (unique per request).
  ///   - fingerprint: What the request asks for, such as its method, path and decoded body.
  /// - Returns: The lifetime of the effects the action started (for a retry, one already ended).
  /// - Throws: ``SessionError``, or ``IdempotencyKeyReused`` for another request under a key the
  ///   session holds.
  @discardableResult
  public func send(
    _ action: Action,
    to key: Key,
    idempotencyKey: String,
    fingerprint: String
  ) async throws -> StoreTask {
    let request = IdempotentRequest(
      key: idempotencyKey,
      fingerprint: IdempotencyRecord.fingerprint(of: fingerprint)
    )
    return try await self.send(action, to: key, request) { _ in () }.task
  }

  /// Sends an action at most once per `idempotencyKey`, refusing the key's reuse for another
  /// request (see ``send(_:to:idempotencyKey:fingerprint:)``), and reads the state as
  /// ``send(_:to:idempotencyKey:reading:)`` does.
  ///
  /// - Parameters:
  ///   - action: The action.
  ///   - key: The session's key.
  ///   - idempotencyKey: The request's key, chosen by the client (unique per request).
  ///   - fingerprint: What the request asks for, such as its method, path and decoded body.
  ///   - read: Reads a value from the state.
  /// - Returns: The value read.
  /// - Throws: ``SessionError``, or ``IdempotencyKeyReused`` for another request under a key the
  ///   session holds.
  public func send<Value: Sendable>(
    _ action: Action,
    to key: Key,
    idempotencyKey: String,
    fingerprint: String,
    reading read: @escaping @Sendable (State) -> Value
  ) async throws -> Value {
    let request = IdempotentRequest(
      key: idempotencyKey,
      fingerprint: IdempotencyRecord.fingerprint(of: fingerprint)
    )
    return try await self.send(action, to: key, request, read).value
  }

  private func send<Value: Sendable>(
    _ action: Action,
    to key: Key,
    _ request: IdempotentRequest,
    _ read: @escaping @Sendable (State) -> Value
  ) async throws -> (task: StoreTask, value: Value) {
    guard self.measuresSends, let interval = self.registryObserver?.sendStarted(key: "\(key)")
    else {
      return try await self.sendOnce(action, to: key, request, read)
    }
    return try await self.measuringSend(interval) {
      try await self.sendOnce(action, to: key, request, read)
    }
  }

  private func sendOnce<Value: Sendable>(
    _ action: Action,
    to key: Key,
    _ request: IdempotentRequest,
    _ read: @escaping @Sendable (State) -> Value
  ) async throws -> (task: StoreTask, value: Value) {
    while true {
      let (entry, live) = try await self.liveEntry(for: key)
      // NB: a replay answers the store's state, so that store must still be the key's.
      guard let store = live, self.leaseIsHeld(entry) else { continue }
      let step = await self.claim(request, of: entry, store)
      switch step {
      case .retry, .wait:
        continue
      case .replay:
        // NB: the key is in the window and no send of it is in flight: the state that includes
        // it was saved (a failed save discards the store before its send lets go of the key).
        self.registryObserver?.idempotentReplay(key: "\(key)")
        return (StoreTask(), read(await store.state))
      case .reused:
        throw IdempotencyKeyReused(key: "\(key)", idempotencyKey: request.key)
      case .apply:
        let sent: (task: StoreTask, value: Value)?
        do {
          sent = try await self.deliver(action, to: entry, store, idempotent: request, read)
        } catch {
          self.release(request.key, of: entry)
          throw error
        }
        self.release(request.key, of: entry)
        if let sent { return sent }
      }
    }
  }

  /// Decides what a send with `request`'s key does with `entry`'s live `store`: apply it (the key
  /// is now claimed), answer it as a replay, refuse it (the key came with another request), or
  /// look again (after a send with the same key ended, or once the store is no longer live).
  ///
  /// NB: decided under the lock without suspending; only a retry that must wait for a send of the
  /// same key in flight suspends (a suspension on every send was most of this path's cost).
  private func claim(
    _ request: IdempotentRequest,
    of entry: Entry,
    _ store: Store<State, Action>
  ) async -> ClaimStep {
    let idempotencyKey = request.key
    let step = self.guarded.withLock { _ -> ClaimStep in
      guard case .live(let current) = entry.phase, current === store else { return .retry }
      if entry.idempotentSends[idempotencyKey] != nil { return .wait }
      if let first = entry.activity.fingerprint(ofIdempotencyKey: idempotencyKey) {
        let differs = first != 0 && request.fingerprint != 0 && first != request.fingerprint
        return differs ? .reused : .replay
      }
      entry.idempotentSends[idempotencyKey] = []
      return .apply
    }
    guard step == .wait else { return step }
    await withUnsafeContinuation { (continuation: UnsafeContinuation<Void, Never>) in
      let waiting = self.guarded.withLock { _ -> Bool in
        guard entry.idempotentSends[idempotencyKey] != nil else { return false }
        entry.idempotentSends[idempotencyKey]?.append(continuation)
        return true
      }
      if !waiting { continuation.resume() }
    }
    return .retry
  }

  /// The send that claimed `idempotencyKey` ended: the retries waiting for it look again.
  private func release(_ idempotencyKey: String, of entry: Entry) {
    let waiters = self.guarded.withLock { _ in
      entry.idempotentSends.removeValue(forKey: idempotencyKey) ?? []
    }
    for waiter in waiters { waiter.resume() }
  }
}

/// What a send with an idempotency key does.
private enum ClaimStep {
  /// Send it: the key is claimed.
  case apply
  /// The session already applied it: answer with its state.
  case replay
  /// The session applied the key with another request: refuse it.
  case reused
  /// Look for the live store again.
  case retry
  /// A send with the same key is in flight: wait for it to end, then look again.
  case wait
}

/// A send's idempotency key, and the digest of its request's fingerprint (0: none given).
struct IdempotentRequest: Sendable {
  let key: String
  let fingerprint: UInt32
}

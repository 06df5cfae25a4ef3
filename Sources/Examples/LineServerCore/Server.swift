import Dispatch
import ExampleFeatures
import Synchronization
import Unidirectional

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The line server: one ``Store`` of ``Connection`` per client, on 127.0.0.1 only.
///
/// Each connection has a reader thread (blocking reads stay off the cooperative pool) that frames
/// lines (refusing lines over 64 KiB without buffering them) and hands them, with back-pressure, to
/// one task that sends them to the connection's store in order. Replies are written by the store's
/// effects, queued so they leave in command order. A client that does not read its replies (its
/// socket buffer is full) is disconnected rather than allowed to block a thread of the pool.
public final class LineServer: Sendable {
  /// The port the server listens on.
  public let port: UInt16
  private let listener: Socket
  private let connections = StoreGroup()
  // NB: not `Synchronization.Mutex`, which ThreadSanitizer misreads on Linux.
  private let sockets = LockedBox<[ObjectIdentifier: Socket]>([:])
  private let accepted = Atomic<Int>(0)
  private let idleTimeout: Duration
  private let clock: any Clock<Duration>
  /// One credit per connection the server may hold open (``maximumConnections``).
  private let slots: DispatchSemaphore

  /// The most connections the server holds open at once; clients past it wait in the listen
  /// backlog until one closes.
  ///
  /// Its descriptor limit less a reserve for everything else: the process must never run out of
  /// descriptors, since libdispatch's worker monitor opens a file every second and crashes the
  /// process when it cannot.
  public let maximumConnections: Int

  /// Starts listening on 127.0.0.1:`port` (0 picks a free port) and accepting clients.
  public init(
    port: UInt16 = 0,
    idleTimeout: Duration = .seconds(30),
    clock: any Clock<Duration> = ContinuousClock()
  ) throws {
    let (listener, boundPort) = try Socket.listen(port: port)
    self.listener = listener
    self.port = boundPort
    self.idleTimeout = idleTimeout
    self.clock = clock
    self.maximumConnections = Self.connectionLimit()
    self.slots = creditSemaphore(self.maximumConnections)
    startThread { [self] in self.acceptLoop() }
  }

  /// Clients accepted so far.
  public var acceptedCount: Int { self.accepted.load(ordering: .relaxed) }

  /// Connections open now.
  public var openCount: Int { self.connections.count }

  /// Stops accepting, shuts every connection's store down with `gracePeriod`, and closes the
  /// connections.
  ///
  /// Returns how many were open.
  public func shutdown(gracePeriod: Duration) async -> Int {
    self.listener.shutdown()
    self.slots.signal()  // an accept loop waiting for a slot finds the listener shut down
    let closed = await self.connections.shutdown(gracePeriod: gracePeriod)
    let open = self.sockets.withLock { sockets in
      defer { sockets = [:] }
      return Array(sockets.values)
    }
    for socket in open { socket.shutdown() }
    return closed
  }

  private func acceptLoop() {
    while true {
      self.slots.wait()
      guard let socket = self.listener.accept() else { return }
      self.accepted.add(1, ordering: .relaxed)
      self.serve(socket)
    }
  }

  /// The descriptor limit less a reserve of 32 for the listener, standard streams and the
  /// runtime's own files; at least 1.
  private static func connectionLimit() -> Int {
    var limit = rlimit()
    guard getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit) == 0 else {
      return 1_024
    }
    // NB: an unlimited soft limit reads as the largest value.
    return max(1, Int(min(limit.rlim_cur, 65_568)) - 32)
  }

  private func serve(_ socket: Socket) {
    let store = Store(initialState: Connection.State()) {
      Connection(
        idleTimeout: self.idleTimeout,
        clock: self.clock,
        reply: { line in
          if !socket.write(line + "\n", blocking: false) { socket.shutdown() }
        },
        close: { socket.shutdown() }
      )
    }
    guard self.connections.insert(store) else {
      socket.write("error: the server is shutting down\n")
      self.slots.signal()
      return
    }
    self.sockets.withLock { $0[ObjectIdentifier(socket)] = socket }
    let (items, continuation) = AsyncStream.makeStream(of: LineFramer.Item.self)
    // Back-pressure: the reader stops reading (and TCP stops the client) while 256 lines wait.
    let credits = creditSemaphore(256)
    Task {
      for await item in items {
        credits.signal()
        let action: Connection.Action
        switch item {
        case .line(let line): action = .received(line)
        case .tooLong: action = .lineTooLong
        }
        // NB: quiet when the server is shutting down: the client just sees the connection end.
        guard await store.trySend(action) != nil else { break }
      }
      await store.trySend(.disconnected)
      await store.shutdown()
      self.connections.remove(store)
      self.sockets.withLock { _ = $0.removeValue(forKey: ObjectIdentifier(socket)) }
      socket.shutdown()
      credits.signal()  // a reader waiting for a credit sees the end
      self.slots.signal()
    }
    startThread {
      var framer = LineFramer(maximum: Connection.maximumLineLength)
      var batch: [LineFramer.Item] = []
      let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 16 * 1024, alignment: 1)
      defer { buffer.deallocate() }
      while true {
        let count = socket.read(into: buffer)
        if count == 0 { break }
        framer.feed(UnsafeRawBufferPointer(rebasing: buffer[..<count]), into: &batch)
        for item in batch {
          credits.wait()
          if case .terminated = continuation.yield(item) { break }
        }
        batch.removeAll(keepingCapacity: true)
      }
      continuation.finish()
    }
  }
}

/// The pipe the SIGINT handler writes to (async-signal-safe) and a thread reads.
private let interruptPipe: [Int32] = {
  var descriptors: [Int32] = [-1, -1]
  _ = pipe(&descriptors)
  return descriptors
}()

/// Suspends until the process receives SIGINT (handled from then on: it no longer kills the
/// process).
public func waitForInterrupt() async {
  let readEnd = interruptPipe[0]
  signal(SIGINT) { _ in
    var byte: UInt8 = 1
    _ = write(interruptPipe[1], &byte, 1)
  }
  await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
    startThread {
      var byte: UInt8 = 0
      while read(readEnd, &byte, 1) < 0 && errno == EINTR {}
      continuation.resume()
    }
  }
}

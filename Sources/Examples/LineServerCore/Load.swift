import ExampleFeatures
import Synchronization
import Unidirectional

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// What `line-server load` does.
public struct LoadOptions: Sendable {
  /// Well-behaved pipelining clients.
  public var clients: Int
  /// Commands each of them sends.
  public var commands: Int
  /// Clients that reset their connection while an effect runs.
  public var resettingClients: Int
  /// Clients that send garbage and over-long lines (and must still get correct replies).
  public var garbageClients: Int
  /// The whole run stops after this long, whatever is left.
  public var timeLimit: Duration
  /// Whether to redraw a one-line progress display on standard error.
  public var showsProgress: Bool

  /// Options; the abusive clients default to 5% of `clients` each (at least one).
  public init(
    clients: Int,
    commands: Int,
    resettingClients: Int? = nil,
    garbageClients: Int? = nil,
    timeLimit: Duration = .seconds(120),
    showsProgress: Bool = false
  ) {
    self.clients = clients
    self.commands = commands
    self.resettingClients = resettingClients ?? max(1, clients / 20)
    self.garbageClients = garbageClients ?? max(1, clients / 20)
    self.timeLimit = timeLimit
    self.showsProgress = showsProgress
  }
}

/// What a load run measured.
public struct LoadReport: Sendable {
  /// Replies a correct server sends to the pipelining clients.
  public var expectedReplies = 0
  /// Replies they received.
  public var replies = 0
  /// Expected replies that never arrived.
  public var lost = 0
  /// Replies that arrived, but not the one expected at that point of the client's order.
  public var outOfOrder = 0
  /// Garbage-sending clients that got exactly the expected errors and replies.
  public var garbageClientsAnsweredCorrectly = 0
  /// Clients that reset their connection mid-effect.
  public var resetClients = 0
  /// How long the clients ran.
  public var seconds = 0.0
  /// Per reply: from writing its command to reading it.
  public var latenciesMilliseconds: [Double] = []
  /// The process's resident memory at the end.
  public var residentMegabytes = 0.0
  /// Connections still open when the server shut down.
  public var connectionsClosedAtShutdown = 0

  /// Replies per second of the run.
  public var commandsPerSecond: Double {
    self.seconds > 0 ? Double(self.replies) / self.seconds : 0
  }

  /// The latency at `fraction` (0.5: the median), in milliseconds.
  public func percentile(_ fraction: Double) -> Double {
    guard !self.latenciesMilliseconds.isEmpty else { return 0 }
    let sorted = self.latenciesMilliseconds.sorted()
    let index = min(sorted.count - 1, Int((Double(sorted.count - 1) * fraction).rounded()))
    return sorted[index]
  }

  /// The last line `line-server load` prints.
  public var summary: String {
    "load: \(self.replies) replies, \(self.lost) lost, \(self.outOfOrder) out of order, "
      + "\(Int(self.commandsPerSecond.rounded())) commands/s, "
      + "p50 \(format(self.percentile(0.5))) ms, p99 \(format(self.percentile(0.99))) ms, "
      + "rss \(format(self.residentMegabytes)) MB"
  }

  /// The table printed before the summary.
  public var table: String {
    let rows: [(String, String)] = [
      ("replies expected", "\(self.expectedReplies)"),
      ("replies received", "\(self.replies)"),
      ("lost", "\(self.lost)"),
      ("out of order", "\(self.outOfOrder)"),
      ("garbage clients answered correctly", "\(self.garbageClientsAnsweredCorrectly)"),
      ("clients that reset mid-effect", "\(self.resetClients)"),
      ("duration", "\(format(self.seconds)) s"),
      ("commands/s", "\(Int(self.commandsPerSecond.rounded()))"),
      (
        "latency p50 / p90 / p99 / max",
        [0.5, 0.9, 0.99, 1].map { format(self.percentile($0)) }
          .joined(separator: " / ") + " ms"
      ),
      ("resident memory", "\(format(self.residentMegabytes)) MB"),
      ("connections closed at shutdown", "\(self.connectionsClosedAtShutdown)"),
    ]
    let width = rows.map(\.0.count).max() ?? 0
    return rows.map { name, value in
      name + String(repeating: " ", count: width - name.count) + "  " + value
    }
    .joined(separator: "\n")
  }
}

private func format(_ value: Double) -> String {
  let tenths = Int((value * 10).rounded())
  return "\(tenths / 10).\(abs(tenths % 10))"
}

/// Starts a server on an ephemeral loopback port, drives it, shuts it down, and reports.
public func runLoad(_ options: LoadOptions) async throws -> LoadReport {
  let server = try LineServer(port: 0, idleTimeout: .seconds(60))
  // NB: the clients' sockets and the server's share this process's descriptors; past them a
  // connect fails, or libdispatch, which opens a file every second, crashes the process.
  let clients = options.clients + options.resettingClients + options.garbageClients
  guard clients <= server.maximumConnections / 2 else {
    _ = await server.shutdown(gracePeriod: .zero)
    throw LoadTooLarge(
      description: """
        \(clients) clients need \(2 * clients) descriptors (both ends of each connection), and \
        this process may use \(server.maximumConnections) (raise ulimit -n, or ask for fewer)
        """
    )
  }
  let start = ContinuousClock.now
  let deadline = start.advanced(by: options.timeLimit)
  let progress = Progress()
  let stopProgress = Atomic<Bool>(false)
  if options.showsProgress {
    startThread {
      while !stopProgress.load(ordering: .relaxed) {
        let (done, replies) = progress.snapshot
        let line = "\r  clients done \(done)/\(options.clients), replies \(replies)   "
        writeToStandardError(line)
        usleep(200_000)
      }
    }
  }
  let outcomes = await withTaskGroup(of: ClientOutcome.self, returning: [ClientOutcome].self) {
    group in
    for client in 0..<options.clients {
      group.addTask {
        await runOnThread {
          pipeliningClient(client, options.commands, server.port, deadline, progress)
        }
      }
    }
    for _ in 0..<options.resettingClients {
      group.addTask { await runOnThread { resettingClient(server.port) } }
    }
    for _ in 0..<options.garbageClients {
      group.addTask { await runOnThread { garbageClient(server.port, deadline) } }
    }
    return await group.reduce(into: []) { $0.append($1) }
  }
  let seconds = start.duration(to: .now)
  stopProgress.store(true, ordering: .relaxed)
  if options.showsProgress { writeToStandardError("\r" + String(repeating: " ", count: 60) + "\r") }

  var report = LoadReport()
  report.seconds =
    Double(seconds.components.seconds) + Double(seconds.components.attoseconds) / 1e18
  for outcome in outcomes {
    switch outcome {
    case .pipelining(let expected, let received, let outOfOrder, let latencies):
      report.expectedReplies += expected
      report.replies += received
      report.lost += expected - received
      report.outOfOrder += outOfOrder
      report.latenciesMilliseconds += latencies
    case .garbage(let correct):
      if correct { report.garbageClientsAnsweredCorrectly += 1 }
    case .reset:
      report.resetClients += 1
    }
  }
  report.residentMegabytes = residentMegabytes()
  report.connectionsClosedAtShutdown = await server.shutdown(gracePeriod: .seconds(2))
  return report
}

private enum ClientOutcome: Sendable {
  case pipelining(expected: Int, received: Int, outOfOrder: Int, latencies: [Double])
  case garbage(correct: Bool)
  case reset
}

/// Counts finished clients and replies for the progress display.
private final class Progress: Sendable {
  private let done = Atomic<Int>(0)
  private let replies = Atomic<Int>(0)

  func clientDone() { self.done.add(1, ordering: .relaxed) }
  func replied(_ count: Int) { self.replies.add(count, ordering: .relaxed) }
  var snapshot: (Int, Int) {
    (self.done.load(ordering: .relaxed), self.replies.load(ordering: .relaxed))
  }
}

/// Runs blocking work on a thread of its own and waits for it.
private func runOnThread<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
  await withCheckedContinuation { continuation in
    startThread { continuation.resume(returning: body()) }
  }
}

/// The commands of one client and the replies a correct server sends, in order.
private func script(client: Int, commands: Int) -> (commands: [String], replies: [String]) {
  var count = 0
  var sent: [String] = []
  var expected: [String] = []
  for index in 0..<commands {
    switch (client + index) % 10 {
    case 0, 3, 6:
      count += 1
      sent.append("inc")
      expected.append("\(count)")
    case 1, 7:
      count -= 1
      sent.append("dec")
      expected.append("\(count)")
    case 4:
      // A reply that takes longer than the ones after it: only queued replies stay in order.
      sent.append("sleep 2")
      expected.append("slept 2")
    default:
      sent.append("get")
      expected.append("\(count)")
    }
  }
  return (sent, expected)
}

/// Reads lines until `count` arrived, the stream ended, or the deadline passed.
private struct LineReader {
  let socket: Socket
  private var framer = LineFramer(maximum: 1 << 20)
  private var items: [LineFramer.Item] = []
  private var head = 0
  private let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 16 * 1024, alignment: 1)

  init(socket: Socket, deadline: ContinuousClock.Instant) {
    self.socket = socket
    var remaining = ContinuousClock.now.duration(to: deadline)
    if remaining < .milliseconds(100) { remaining = .milliseconds(100) }
    var timeout = timeval(
      tv_sec: Int(remaining.components.seconds),
      tv_usec: Int(remaining.components.attoseconds / 1_000_000_000_000)
    )
    setsockopt(
      socket.descriptor,
      SOL_SOCKET,
      SO_RCVTIMEO,
      &timeout,
      socklen_t(MemoryLayout<timeval>.size)
    )
  }

  mutating func next() -> String? {
    while self.head == self.items.count {
      self.items.removeAll(keepingCapacity: true)
      self.head = 0
      let count = self.socket.read(into: self.buffer)
      if count == 0 { return nil }
      self.framer.feed(UnsafeRawBufferPointer(rebasing: self.buffer[..<count]), into: &self.items)
    }
    defer { self.head += 1 }
    if case .line(let line) = self.items[self.head] { return line }
    return ""
  }

  func close() { self.buffer.deallocate() }
}

private func pipeliningClient(
  _ client: Int,
  _ commands: Int,
  _ port: UInt16,
  _ deadline: ContinuousClock.Instant,
  _ progress: Progress
) -> ClientOutcome {
  defer { progress.clientDone() }
  let (sent, expected) = script(client: client, commands: commands)
  guard let socket = try? Socket.connect(port: port) else {
    return .pipelining(expected: commands, received: 0, outOfOrder: 0, latencies: [])
  }
  let sentAt = LockedBox<[ContinuousClock.Instant]>([])
  // The writer pipelines every command, in chunks, while this thread reads the replies.
  startThread {
    let chunk = 16
    for start in stride(from: 0, to: sent.count, by: chunk) {
      let lines = sent[start..<min(sent.count, start + chunk)]
      let now = ContinuousClock.now
      sentAt.withLock { $0 += Array(repeating: now, count: lines.count) }
      guard socket.write(lines.joined(separator: "\n") + "\n") else { return }
    }
  }
  var reader = LineReader(socket: socket, deadline: deadline)
  defer { reader.close() }
  var received = 0
  var outOfOrder = 0
  var latencies: [Double] = []
  latencies.reserveCapacity(commands)
  while received < commands, let line = reader.next() {
    let arrived = ContinuousClock.now
    if line != expected[received] { outOfOrder += 1 }
    if let sentTime = sentAt.withLock({ received < $0.count ? $0[received] : nil }) {
      let elapsed = sentTime.duration(to: arrived)
      latencies.append(
        Double(elapsed.components.seconds) * 1_000
          + Double(elapsed.components.attoseconds) / 1e15
      )
    }
    received += 1
    if received % 64 == 0 { progress.replied(64) }
  }
  progress.replied(received % 64)
  socket.write("quit\n")
  return .pipelining(
    expected: commands,
    received: received,
    outOfOrder: outOfOrder,
    latencies: latencies
  )
}

/// Starts effects (a sleep, a timer), then resets the connection.
private func resettingClient(_ port: UInt16) -> ClientOutcome {
  guard let socket = try? Socket.connect(port: port) else { return .reset }
  socket.write("start-timer\nsleep 500\ninc\n")
  socket.reset()
  return .reset
}

/// Sends garbage, an over-long line and a bad argument; expects one error each, then a
/// working connection.
private func garbageClient(_ port: UInt16, _ deadline: ContinuousClock.Instant) -> ClientOutcome {
  guard let socket = try? Socket.connect(port: port) else { return .garbage(correct: false) }
  let longLine = String(repeating: "x", count: 70_000)
  startThread {
    socket.write("\u{01}\u{02}garbage\u{7F}\n\(longLine)\nsleep forever\n\ninc\nget\n")
  }
  var reader = LineReader(socket: socket, deadline: deadline)
  defer { reader.close() }
  var replies: [String] = []
  while replies.count < 6, let line = reader.next() { replies.append(line) }
  socket.write("quit\n")
  let correct =
    replies.count == 6
    && replies[0].hasPrefix("error: unknown command")
    && replies[1] == "error: line longer than 65536 bytes"
    && replies[2].hasPrefix("error: sleep takes milliseconds")
    && replies[3] == "error: empty line"
    && replies[4] == "1" && replies[5] == "1"
  return .garbage(correct: correct)
}

/// The process's resident memory, from `/proc/self/statm`.
private func residentMegabytes() -> Double {
  guard let file = fopen("/proc/self/statm", "r") else { return 0 }
  defer { fclose(file) }
  var size = 0
  var resident = 0
  guard readTwoIntegers(file, &size, &resident) else { return 0 }
  return Double(resident * Int(sysconf(Int32(_SC_PAGESIZE)))) / 1_048_576
}

private func readTwoIntegers(
  _ file: UnsafeMutablePointer<FILE>,
  _ first: inout Int,
  _ second: inout Int
) -> Bool {
  var line = [CChar](repeating: 0, count: 256)
  guard fgets(&line, Int32(line.count), file) != nil else { return false }
  let text = String(decoding: line.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
  let fields = text.split(separator: " ").compactMap { Int($0) }
  guard fields.count >= 2 else { return false }
  first = fields[0]
  second = fields[1]
  return true
}

/// Writes `text` to standard error, unbuffered.
public func writeToStandardError(_ text: String) {
  var text = text
  text.withUTF8 { bytes in _ = write(STDERR_FILENO, bytes.baseAddress, bytes.count) }
}

/// A load the process's descriptor limit cannot hold.
struct LoadTooLarge: Error, CustomStringConvertible {
  let description: String
}

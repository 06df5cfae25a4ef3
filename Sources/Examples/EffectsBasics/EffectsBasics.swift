// `swift run effects-basics`: the counter case study, driven by commands on standard input.
import Dispatch
import ExampleFeatures
import Unidirectional

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The counter case study as a command-line program.
///
/// On a terminal, commands run as you type them and their effects (a timer, a delayed
/// re-increment, a computation) go on in the background. Read from a pipe or a file, each command
/// is echoed, and a computation (`fact`, `prime`) finishes before the next command, so the same
/// input prints the same output on every run. At the end of the input the timer stops and pending
/// effects finish; `quit` cancels them at once.
@main
struct EffectsBasics {
  static let help = """
    commands (one per line):
      +       increment
      -       decrement (below zero, re-increments after 1 s unless you increment first)
      fact    a fact about the count
      timer   start a timer that speeds up (1000, 950, 900 … 10 ms)
      stop    stop the timer
      prime   the nth prime for the current count, with progress
      help    this list
      quit    exit at once (the end of the input also exits, once pending effects finish)
    """

  /// Lines longer than this are refused (and skipped without being buffered).
  static let maximumLineLength = 1_024

  static func main() async {
    let interactive = isatty(STDIN_FILENO) != 0
    say("effects-basics: type 'help' for commands")
    let store = Store(initialState: Counter.State(), observer: StatePrinter()) { Counter() }
    say(describe(Counter.State()))
    var pending: [StoreTask] = []
    var quit = false
    loop: for await item in InputLines(maximumLength: Self.maximumLineLength) {
      guard case .line(let rawLine) = item else {
        say("error: a line longer than \(Self.maximumLineLength) bytes was ignored")
        continue
      }
      let command = rawLine.trimmingPrefix(while: \.isWhitespace)
        .prefix { !$0.isWhitespace }.lowercased()
      if command.isEmpty { continue }
      if !interactive { say("> " + printable(command)) }
      switch command {
      case "+": pending.append(await store.send(.incrementTapped))
      case "-": pending.append(await store.send(.decrementTapped))
      case "timer": pending.append(await store.send(.startTimerTapped))
      case "stop": await store.send(.stopTimerTapped)
      case "fact", "prime":
        let task = await store.send(command == "fact" ? .factTapped : .nthPrimeTapped)
        if interactive { pending.append(task) } else { await task.finish() }
      case "help", "?": say(Self.help)
      case "quit", "exit", "q":
        quit = true
        break loop
      default: say("unknown command '\(printable(command))'; type 'help' for the list")
      }
      pending.removeAll { $0.isFinished }
    }
    if !quit {
      // The end of the input: stop the endless timer, let the rest finish.
      await store.send(.stopTimerTapped)
      for task in pending { await task.finish() }
    }
    await store.shutdown()
    say("bye")
  }
}

/// Prints the state each time its description changes, as the store reduces it: on the store's
/// executor, in the order actions are reduced, so the output never races the commands' echo.
struct StatePrinter: StoreObserver {
  typealias State = Counter.State
  typealias Action = Counter.Action

  func stateChanged(from oldState: Counter.State, to newState: Counter.State) {
    let line = describe(newState)
    if line != describe(oldState) { say(line) }
  }
}

/// The state on one line.
func describe(_ state: Counter.State) -> String {
  var parts = ["count: \(state.count)"]
  if state.isTimerRunning { parts.append("timer: on") }
  if let progress = state.progress { parts.append("prime: \(Int(progress * 100))%") }
  if let fact = state.fact { parts.append("fact: \(fact)") }
  return parts.joined(separator: " | ")
}

/// At most 20 letters, digits, punctuation and symbols of what the user typed (no control bytes).
func printable(_ command: String) -> String {
  String(
    command.prefix(20).filter { $0.isLetter || $0.isNumber || $0.isPunctuation || $0.isSymbol }
  )
}

/// Writes a line to standard output at once, unbuffered.
///
/// NB: not `print` + `fflush(nil)`: flushing every stream also waits for standard input's lock,
/// which a thread blocked in `readLine` holds until the next newline, so on a terminal the output
/// froze until the user typed another line. Input is read with `read(2)` for the same reason.
func say(_ text: String) {
  var line = text + "\n"
  line.withUTF8 { bytes in
    guard let base = bytes.baseAddress else { return }
    var offset = 0
    while offset < bytes.count {
      let written = write(STDOUT_FILENO, base + offset, bytes.count - offset)
      if written <= 0 { return }
      offset += written
    }
  }
}

/// Standard input as lines of at most `maximumLength` bytes, read on a thread of its own with
/// `read(2)` (no lock of the C library is held while it waits) and handed over with back-pressure:
/// the thread waits while 64 lines are unread, so a huge input is never held in memory.
struct InputLines: AsyncSequence {
  typealias Element = LineFramer.Item

  let maximumLength: Int

  func makeAsyncIterator() -> Iterator {
    let (items, continuation) = AsyncStream.makeStream(of: LineFramer.Item.self)
    let credits = creditSemaphore(64)
    let maximumLength = self.maximumLength
    startThread {
      var framer = LineFramer(maximum: maximumLength)
      var batch: [LineFramer.Item] = []
      let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 16 * 1_024, alignment: 1)
      defer { buffer.deallocate() }
      while let base = buffer.baseAddress {
        let count = read(STDIN_FILENO, base, buffer.count)
        if count < 0 && errno == EINTR { continue }
        if count <= 0 { break }
        framer.feed(UnsafeRawBufferPointer(rebasing: buffer[..<count]), into: &batch)
        for item in batch {
          credits.wait()
          continuation.yield(item)
        }
        batch.removeAll(keepingCapacity: true)
      }
      continuation.finish()
    }
    return Iterator(items: items.makeAsyncIterator(), credits: credits)
  }

  struct Iterator: AsyncIteratorProtocol {
    var items: AsyncStream<LineFramer.Item>.Iterator
    let credits: DispatchSemaphore

    mutating func next() async -> LineFramer.Item? {
      await self.next(isolation: nil)
    }

    mutating func next(isolation actor: isolated (any Actor)?) async -> LineFramer.Item? {
      guard let item = await self.items.next(isolation: actor) else { return nil }
      self.credits.signal()
      return item
    }
  }
}

// `swift run effects-basics`: the counter case study, driven by commands on standard input.
import Dispatch
import ExampleFeatures
import Unidirectional

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

let help = """
  commands (one per line):
    +       increment
    -       decrement (below zero, re-increments after 1 s unless you increment first)
    fact    a fact about the count
    timer   start a timer that speeds up (1000, 950, 900 … 10 ms)
    stop    stop the timer
    prime   the nth prime for the current count, with progress
    help    this list
    quit    exit (so does the end of input)
  """

/// Standard input as lines, read on a Dispatch thread so no task blocks on it.
func inputLines() -> AsyncStream<String> {
  let (lines, continuation) = AsyncStream.makeStream(of: String.self)
  DispatchQueue.global().async {
    while let line = readLine(strippingNewline: true) {
      continuation.yield(line)
    }
    continuation.finish()
  }
  return lines
}

func describe(_ state: Counter.State) -> String {
  var parts = ["count: \(state.count)"]
  if state.isTimerRunning { parts.append("timer: on") }
  if let progress = state.progress { parts.append("prime: \(Int(progress * 100))%") }
  if let fact = state.fact { parts.append("fact: \(fact)") }
  return parts.joined(separator: " | ")
}

/// Writes a line to standard output at once, unbuffered.
///
/// NB: not `print` + `fflush(nil)`: flushing every stream also waits for standard input's lock,
/// which the reading thread holds inside `readLine` until the next newline, so on a terminal
/// the output froze until the user typed another line.
func say(_ text: String) {
  var line = text + "\n"
  line.withUTF8 { bytes in
    var offset = 0
    while offset < bytes.count {
      let written = write(STDOUT_FILENO, bytes.baseAddress! + offset, bytes.count - offset)
      if written <= 0 { return }
      offset += written
    }
  }
}

let store = Store(initialState: Counter.State()) { Counter() }

let printer = Task {
  var last: String?
  for await state in store.states {
    let line = describe(state)
    if line != last {
      say(line)
      last = line
    }
  }
}

say("effects-basics: type 'help' for commands")
loop: for await rawLine in inputLines() {
  let command = rawLine.trimmingPrefix(while: \.isWhitespace).prefix { !$0.isWhitespace }
    .lowercased()
  switch command {
  case "+": await store.send(.incrementTapped)
  case "-": await store.send(.decrementTapped)
  case "fact": await store.send(.factTapped)
  case "timer": await store.send(.startTimerTapped)
  case "stop": await store.send(.stopTimerTapped)
  case "prime": await store.send(.nthPrimeTapped)
  case "help", "?": say(help)
  case "quit", "exit", "q": break loop
  case "": continue
  default:
    let shown = String(command.prefix(20)).filter { $0.isLetter || $0.isNumber || $0.isPunctuation }
    say("unknown command '\(shown)'; type 'help' for the list")
  }
}

await store.shutdown()
await printer.value
say("bye")

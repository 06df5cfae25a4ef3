// `swift run nth-prime [N]`: finds the Nth prime with a live progress bar; Ctrl-C stops it.
import Dispatch
import ExampleFeatures
import Unidirectional

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

let usage = """
  usage: nth-prime [N]

  Finds the Nth prime (default 50,000; N from 1 to 5,000,000), showing progress.
  Press Ctrl-C to stop: the computation is cancelled and the program exits with status 130.
  """

/// Parses the arguments; prints usage or a one-line error and exits on bad input.
func parseN(_ arguments: [String]) -> Int {
  switch arguments.count {
  case 0:
    return 50_000
  case 1 where arguments[0] == "--help" || arguments[0] == "-h":
    print(usage)
    exit(0)
  case 1:
    let text = arguments[0].replacing("_", with: "").replacing(",", with: "")
    guard let n = Int(text), (1...5_000_000).contains(n) else {
      writeError(
        "error: N must be a whole number from 1 to 5,000,000 (got '\(arguments[0])'); see --help"
      )
      exit(2)
    }
    return n
  default:
    writeError("error: expected at most one argument, N (got \(arguments.count)); see --help")
    exit(2)
  }
}

func writeError(_ line: String) {
  let text = line + "\n"
  _ = text.withCString { write(STDERR_FILENO, $0, strlen($0)) }
}

/// Draws progress: a bar redrawn in place on a terminal, a line per 10% otherwise.
struct ProgressView {
  let isTerminal = isatty(STDOUT_FILENO) == 1
  var lastDecile = -1

  mutating func render(_ state: NthPrime.State) {
    if self.isTerminal {
      let width = 30
      let filled = Int(state.progress * Double(width))
      let bar =
        String(repeating: "#", count: filled) + String(repeating: "-", count: width - filled)
      let percent = Int(state.progress * 100)
      print("\r[\(bar)] \(percent)%  checked \(state.checked)", terminator: "")
      fflush(nil)
    } else {
      let decile = Int(state.progress * 10)
      if decile > self.lastDecile {
        self.lastDecile = decile
        print("progress: \(decile * 10)% (checked \(state.checked))")
        fflush(nil)
      }
    }
  }

  func finish() {
    if self.isTerminal { print("") }
  }
}

/// Ctrl-C cancels `task`, the lifetime of the action that started the work.
///
/// NB: a nonisolated function: a closure written in `main` is main-actor isolated, and Dispatch
/// calls the handler on its own thread.
func cancelOnInterrupt(
  _ task: StoreTask,
  recording interrupted: LockIsolated<Bool>
) -> any DispatchSourceSignal {
  signal(SIGINT, SIG_IGN)
  let source = DispatchSource.makeSignalSource(signal: SIGINT, queue: .global())
  source.setEventHandler {
    interrupted.setValue(true)
    task.cancel()
  }
  // NB: the source arms asynchronously; a Ctrl-C before that would be ignored (SIG_IGN) and
  // lost. Wait until it is registered before showing any progress.
  let registered = DispatchSemaphore(value: 0)
  source.setRegistrationHandler { registered.signal() }
  source.resume()
  registered.wait()
  return source
}

/// Finds the Nth prime with a cancellable, progress-reporting effect.
@main
struct NthPrimeCommand {
  static func main() async {
    let n = parseN(Array(CommandLine.arguments.dropFirst()))
    let store = Store(initialState: NthPrime.State(n: n)) { NthPrime() }
    let interrupted = LockIsolated(false)
    let task = await store.send(.start)
    let interrupts = cancelOnInterrupt(task, recording: interrupted)

    let renderer = Task {
      var view = ProgressView()
      for await state in store.states {
        view.render(state)
        if state.prime != nil { break }
      }
      view.finish()
    }

    await task.finish()
    interrupts.cancel()  // NB: also keeps the source alive until the work has ended
    let state = await store.state
    await store.shutdown()
    await renderer.value

    if let prime = state.prime {
      print("The \(ordinal(n)) prime is \(prime).")
      exit(0)
    } else if interrupted.value {
      print(
        "Stopped after checking \(state.checked) numbers (\(Int(state.progress * 100))% of the way to the \(ordinal(n)) prime)."
      )
      exit(130)
    } else {
      writeError("error: the computation ended without a result")
      exit(1)
    }
  }
}

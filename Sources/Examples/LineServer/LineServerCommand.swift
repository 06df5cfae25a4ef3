import LineServerCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The value after `flag` in `arguments`, or `fallback`.
func value(of flag: String, in arguments: [String], default fallback: Int) -> Int {
  guard let index = arguments.firstIndex(of: flag), index + 1 < arguments.count,
    let value = Int(arguments[index + 1]), value >= 0
  else { return fallback }
  return value
}

func usage() -> Never {
  writeToStandardError(
    """
    usage: line-server serve [--port N] [--idle-timeout SECONDS]
           line-server load [--clients N] [--commands M] [--time-limit SECONDS]

    """
  )
  exit(2)
}

/// `line-server serve [--port N]` or `line-server load --clients N --commands M`.
@main
struct LineServerCommand {
  static func main() async {
    let arguments = Array(CommandLine.arguments.dropFirst())
    switch arguments.first {
    case "serve":
      let port = value(of: "--port", in: arguments, default: 7070)
      guard port <= Int(UInt16.max) else { usage() }
      let server: LineServer
      do {
        server = try LineServer(
          port: UInt16(port),
          idleTimeout: .seconds(value(of: "--idle-timeout", in: arguments, default: 30))
        )
      } catch {
        writeToStandardError("line-server: \(error)\n")
        exit(1)
      }
      print("line-server: listening on 127.0.0.1:\(server.port) (Ctrl-C to stop)")
      fflush(nil)  // a process reading the port from a pipe gets it now
      await waitForInterrupt()
      let closed = await server.shutdown(gracePeriod: .seconds(2))
      print("line-server: shut down, closed \(closed) connection\(closed == 1 ? "" : "s")")
      exit(0)

    case "load":
      let options = LoadOptions(
        clients: value(of: "--clients", in: arguments, default: 200),
        commands: value(of: "--commands", in: arguments, default: 100),
        timeLimit: .seconds(value(of: "--time-limit", in: arguments, default: 120)),
        showsProgress: isatty(STDERR_FILENO) != 0
      )
      do {
        let report = try await runLoad(options)
        print(report.table)
        print(report.summary)
        exit(report.lost == 0 && report.outOfOrder == 0 ? 0 : 1)
      } catch {
        writeToStandardError("line-server: \(error)\n")
        exit(1)
      }

    default:
      usage()
    }
  }
}

import Unidirectional

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// `swift run -c release Benchmarks [--filter text] [--samples n]`
/// `swift run -c release Benchmarks --scale [--stores 10000,100000] [--ticks n]`
/// `swift run -c release Benchmarks --memory`: bytes per store at each stage of its life.
@main
struct BenchmarkRunner {
  static func main() async {
    var harness = Harness()
    var scale = false
    var storeCounts = [10_000, 100_000]
    var ticks = 5
    var arguments = CommandLine.arguments.dropFirst()
    while let argument = arguments.popFirst() {
      switch argument {
      case "--filter": harness.filter = arguments.popFirst()
      case "--samples":
        harness.samples = arguments.popFirst().flatMap { Int($0) } ?? harness.samples
      case "--scale": scale = true
      case "--memory":
        await memoryBreakdown(count: 10_000)
        exit(0)
      case "--stores":
        storeCounts = (arguments.popFirst() ?? "").split(separator: ",").compactMap { Int($0) }
      case "--ticks": ticks = arguments.popFirst().flatMap { Int($0) } ?? ticks
      case "--sessions":
        armedSessions = arguments.popFirst().flatMap { Int($0) } ?? armedSessions
      default:
        print(
          """
          usage: Benchmarks [--filter text] [--samples n]
                 Benchmarks --scale [--stores 10000,100000] [--ticks n] [--sessions 1000000]
                 Benchmarks --memory
          """
        )
        exit(2)
      }
    }
    if scale {
      await scaleFigures(storeCounts: storeCounts, ticks: max(1, ticks))
      exit(0)
    }
    print(
      "Unidirectional benchmarks: median and min ns/op of \(harness.samples) samples; floors measured in the same run"
    )
    // NB: the sessions first, in a process that holds only them: the cases below leave stores
    // and armed timers behind (the registry activation case alone ~110,000 sessions, each with an
    // idle timer in the clock's queue), and measured after them a session request paid for a
    // queue a hundred times its own (0.76x against 0.81-0.85x measured first).
    Harness.printHeader()
    await sessionFigures(filter: harness.filter)
    await harness.run(
      storeBenchmarks() + cancellationBenchmarks() + clockBenchmarks() + compositionBenchmarks()
        + testStoreBenchmarks() + registryBenchmarks()
    )
    await memoryFigures(filter: harness.filter)
    let misses = benchmarkMisses.value
    print(
      misses.isEmpty
        ? "misses: none"
        : "misses: \(misses.count): \(misses.joined(separator: "; "))"
    )
  }
}

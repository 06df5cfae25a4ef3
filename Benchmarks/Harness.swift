import CMallocStats
import Unidirectional

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// One measured case and the raw primitive it competes with, timed alternately in the same run.
struct Benchmark: Sendable {
  /// What the case measures, such as `store.send (.none)`.
  ///
  var name: String
  /// The primitive it is compared with, such as `actor method`.
  ///
  var floorName: String?
  /// The operations one sample performs (results are per operation).
  var operations: Int
  /// The target ratio to the floor, printed next to the measured one.
  var target: Double?
  /// Runs `operations` operations of the case.
  var run: @Sendable () async -> Void
  /// Runs `operations` operations of the floor.
  var floor: (@Sendable () async -> Void)?
  /// A target in nanoseconds per operation, for a case with no floor.
  var absoluteTarget: Double? = nil
}

/// A sample set: nanoseconds per operation.
struct Samples {
  var values: [Double] = []

  var median: Double {
    let sorted = self.values.sorted()
    guard !sorted.isEmpty else { return .nan }
    let middle = sorted.count / 2
    return sorted.count.isMultiple(of: 2)
      ? (sorted[middle - 1] + sorted[middle]) / 2 : sorted[middle]
  }

  var minimum: Double { self.values.min() ?? .nan }
}

struct Harness {
  var samples = 11
  var warmUps = 2
  var filter: String?

  /// Prints the column header (and a warning in a debug build).
  static func printHeader() {
    #if DEBUG
    print("warning: a debug build; run `swift run -c release Benchmarks` for real figures")
    #endif
    print(
      Self.pad("case", 54),
      Self.pad("median", 10),
      Self.pad("min", 10),
      Self.pad("floor", 10),
      Self.pad("ratio", 7),
      "target   floor primitive"
    )
  }

  /// Measures each benchmark whose name contains the filter and prints one line for it.
  @concurrent
  func run(_ benchmarks: [Benchmark]) async {
    for benchmark in benchmarks {
      if let filter, !benchmark.name.contains(filter) { continue }
      let result = await self.measure(benchmark)
      var line =
        Self.pad(benchmark.name, 54) + " " + Self.pad(Self.format(result.case.median), 10) + " "
        + Self.pad(Self.format(result.case.minimum), 10) + " "
      if let floor = result.floor {
        let ratio = result.case.median / floor.median
        line += Self.pad(Self.format(floor.median), 10) + " "
        line += Self.pad(Self.ratio(ratio, target: benchmark.target), 7) + " "
        line += Self.pad(benchmark.target.map { "≤" + Self.format($0, digits: 1) + "x" } ?? "", 8)
        line += " " + (benchmark.floorName ?? "")
        if let target = benchmark.target, ratio > target {
          line += "  MISS"
          recordMiss(benchmark.name)
        }
      } else if let target = benchmark.absoluteTarget {
        line += Self.pad("", 10) + " " + Self.pad("", 7) + " "
        line += Self.pad("≤" + Self.format(target / 1_000, digits: 0) + " µs", 8)
        line += " " + (benchmark.floorName ?? "")
        if result.case.median > target {
          line += "  MISS"
          recordMiss(benchmark.name)
        }
      }
      print(line)
    }
  }

  private func measure(_ benchmark: Benchmark) async -> (case: Samples, floor: Samples?) {
    for _ in 0..<self.warmUps {
      await benchmark.run()
      await benchmark.floor?()
    }
    var measured = Samples()
    var floor: Samples? = benchmark.floor == nil ? nil : Samples()
    for _ in 0..<self.samples {
      measured.values.append(await Self.time(benchmark.operations, benchmark.run))
      if let run = benchmark.floor {
        floor?.values.append(await Self.time(benchmark.operations, run))
      }
    }
    return (measured, floor)
  }

  private static func time(_ operations: Int, _ body: @Sendable () async -> Void) async -> Double {
    let clock = ContinuousClock()
    let start = clock.now
    await body()
    let elapsed = start.duration(to: clock.now)
    let (seconds, attoseconds) = elapsed.components
    let nanoseconds = Double(seconds) * 1e9 + Double(attoseconds) / 1e9
    return nanoseconds / Double(operations)
  }

  static func format(_ value: Double, digits: Int = 1) -> String {
    guard value.isFinite else { return "-" }
    var scale = 1.0
    for _ in 0..<digits { scale *= 10 }
    let rounded = (value * scale).rounded() / scale
    return "\(rounded)"
  }

  /// A ratio with two decimals, or three when two would round it onto its target: a row that
  /// misses must not read as if it met it (0.8952x printed "0.9x" next to "≥0.9x MISS").
  static func ratio(_ value: Double, target: Double?) -> String {
    let nearTarget = target.map { abs(value - $0) < 0.005 } ?? false
    return Self.format(value, digits: nearTarget ? 3 : 2) + "x"
  }

  static func pad(_ text: String, _ width: Int) -> String {
    text.count >= width ? text : text + String(repeating: " ", count: width - text.count)
  }
}

/// The rows that missed their targets in this run (the one-line summary at the end).
let benchmarkMisses = LockIsolated<[String]>([])

/// Records a missed target.
func recordMiss(_ name: String) {
  benchmarkMisses.withValue { $0.append(name) }
}

/// Prints a row that is not a timed case: a figure, its floor or target, and `MISS` when `missed`.
func printFigure(
  _ name: String,
  _ value: String,
  floor: String = "",
  ratio: String = "",
  target: String,
  missed: Bool
) {
  print(
    Harness.pad(name, 54),
    Harness.pad(value, 10),
    Harness.pad("", 10),
    Harness.pad(floor, 10),
    Harness.pad(ratio, 7),
    target + (missed ? "  MISS" : "")
  )
  if missed { recordMiss(name) }
}

/// Bytes currently allocated by malloc (glibc's `mallinfo2`: its heap and the blocks it maps on
/// their own, such as a large array), for per-object memory figures.
func allocatedBytes() -> Int {
  Int(cmallocstats_allocated_bytes())
}

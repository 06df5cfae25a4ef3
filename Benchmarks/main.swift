import Unidirectional

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

// `swift run -c release Benchmarks [--filter text] [--samples n]`
var harness = Harness()
var arguments = CommandLine.arguments.dropFirst()
while let argument = arguments.popFirst() {
  switch argument {
  case "--filter": harness.filter = arguments.popFirst()
  case "--samples": harness.samples = arguments.popFirst().flatMap { Int($0) } ?? harness.samples
  default:
    print("usage: Benchmarks [--filter text] [--samples n]")
    exit(2)
  }
}
print(
  "Unidirectional benchmarks: median and min ns/op of \(harness.samples) samples; floors measured in the same run"
)
await harness.run(
  storeBenchmarks() + cancellationBenchmarks() + clockBenchmarks() + compositionBenchmarks()
    + testStoreBenchmarks()
)
await memoryFigures(filter: harness.filter)

import Unidirectional

@main
struct BenchmarkRunner {
  static func main() async {
    print("benchmarks: not yet")
  }
}

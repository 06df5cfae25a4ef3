import Testing

@testable import SessionHTTPBenchmark

/// The HTTP benchmark reads `wrk`'s report and its own options; a report or an option it cannot
/// read must stop it with a message, never print figures made of defaults.
@Suite struct SessionHTTPBenchmarkTests {
  /// A `wrk --latency` report, as `wrk` 4.2 prints it (one server answering 404 to every request).
  static let report = """
    Running 1s test @ http://127.0.0.1:18765/missing
      1 threads and 4 connections
      Thread Stats   Avg      Stdev     Max   +/- Stdev
        Latency     3.31ms    4.21ms  42.84ms   96.62%
        Req/Sec     1.44k   327.48     1.87k    70.00%
      Latency Distribution
         50%  470.00us
         75%    3.08ms
         90%    4.02ms
         99%    1.20s
      1430 requests in 1.00s, 726.53KB read
      Socket errors: connect 0, read 3, write 0, timeout 2
      Non-2xx or 3xx responses: 1430
    Requests/sec:   1428.67
    Transfer/sec:    725.86KB
    """

  @Test func aReportGivesItsRateItsPercentilesInMillisecondsAndItsErrors() throws {
    let figures = try parseWrk(Self.report)
    #expect(figures.perSecond == 1428.67)
    #expect(abs(figures.p50 - 0.47) < 1e-9)
    #expect(figures.p99 == 1200)
    #expect(figures.errors == 1430 + 3 + 2)
  }

  @Test func aReportWithoutItsLatencyDistributionIsAnErrorThatShowsTheReport() {
    let text = "Running 1s test @ http://127.0.0.1:1/\nRequests/sec:   10.00\n"
    #expect {
      try parseWrk(text)
    } throws: { error in
      "\(error)".contains("could not read wrk's report") && "\(error)".contains("Requests/sec")
    }
  }

  @Test func aLatencyInAnUnknownUnitIsNotRead() {
    #expect(milliseconds("3.5ms") == 3.5)
    #expect(milliseconds("2.00s") == 2000)
    #expect(milliseconds("12.5m") == nil)
    #expect(milliseconds("fast") == nil)
  }

  @Test func optionsTakePositiveNumbersAndKnownRoutesOnly() throws {
    let options = try Options(arguments: ["benchmark", "--rounds", "4", "--only", "nonetask"])
    #expect(options.rounds == 4)
    #expect(options.only == "nonetask")
    let refused = [["--seconds", "0"], ["--only", "all"], ["--fast", "1"], ["--keys"]]
    for arguments in refused {
      #expect(throws: BenchmarkError.self, "\(arguments)") {
        try Options(arguments: ["benchmark"] + arguments)
      }
    }
  }
}

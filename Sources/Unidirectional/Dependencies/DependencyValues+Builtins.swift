#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif

// MARK: - Clocks

extension DependencyValues {
  /// A clock that keeps running while the machine sleeps; live: `ContinuousClock`, test: an
  /// ``UnimplementedClock`` (override it with a ``TestClock`` or an ``ImmediateClock``).
  public var continuousClock: any Clock<Duration> {
    get { self[ContinuousClockKey.self] }
    set { self[ContinuousClockKey.self] = newValue }
  }

  /// A clock that stops while the machine sleeps; live: `SuspendingClock`, test: an
  /// ``UnimplementedClock``.
  public var suspendingClock: any Clock<Duration> {
    get { self[SuspendingClockKey.self] }
    set { self[SuspendingClockKey.self] = newValue }
  }

  /// Makes UUIDs; live: random, test: unimplemented (use ``UUIDGenerator/incrementing``).
  public var uuid: UUIDGenerator {
    get { self[UUIDGeneratorKey.self] }
    set { self[UUIDGeneratorKey.self] = newValue }
  }

  /// Reads the current date; live: the system clock, test: unimplemented (use
  /// ``DateGenerator/constant(_:)``).
  public var date: DateGenerator {
    get { self[DateGeneratorKey.self] }
    set { self[DateGeneratorKey.self] = newValue }
  }
}

private enum ContinuousClockKey: DependencyKey {
  static let liveValue: any Clock<Duration> = ContinuousClock()
  static var testValue: any Clock<Duration> { UnimplementedClock(name: "continuousClock") }
}

private enum SuspendingClockKey: DependencyKey {
  static let liveValue: any Clock<Duration> = SuspendingClock()
  static var testValue: any Clock<Duration> { UnimplementedClock(name: "suspendingClock") }
}

private enum UUIDGeneratorKey: DependencyKey {
  static let liveValue = UUIDGenerator { UUID() }
  static var testValue: UUIDGenerator {
    UUIDGenerator {
      reportIssue(
        """
        An unimplemented dependency was used: '\\.uuid'.

        Override it, for example with '$0.uuid = .incrementing'.
        """
      )
      return UUID(uuid: (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0))
    }
  }
}

private enum DateGeneratorKey: DependencyKey {
  static let liveValue = DateGenerator { Date() }
  static var testValue: DateGenerator {
    DateGenerator {
      reportIssue(
        """
        An unimplemented dependency was used: '\\.date'.

        Override it, for example with '$0.date = .constant(Date(timeIntervalSince1970: 0))'.
        """
      )
      return Date(timeIntervalSince1970: 0)
    }
  }
}

// MARK: - Generators

/// Makes UUIDs; a dependency so tests get predictable ones.
public struct UUIDGenerator: Sendable {
  private let generate: @Sendable () -> UUID

  /// Creates a generator from a closure.
  public init(_ generate: @escaping @Sendable () -> UUID) {
    self.generate = generate
  }

  /// A new UUID.
  public func callAsFunction() -> UUID {
    self.generate()
  }

  /// UUIDs counting up from `00000000-0000-0000-0000-000000000000`.
  public static var incrementing: Self {
    let counter = LockIsolated<UInt64>(0)
    return Self {
      let value = counter.withValue { count -> UInt64 in
        defer { count += 1 }
        return count
      }
      let hex = String(value, radix: 16, uppercase: true)
      let padded = String(repeating: "0", count: max(0, 12 - hex.count)) + hex
      return UUID(uuidString: "00000000-0000-0000-0000-\(padded)")
        ?? UUID(uuid: (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0))
    }
  }

  /// Always the same UUID.
  public static func constant(_ uuid: UUID) -> Self {
    Self { uuid }
  }
}

/// Reads the current date; a dependency so tests control time-stamps.
public struct DateGenerator: Sendable {
  private let generate: @Sendable () -> Date

  /// Creates a generator from a closure.
  public init(_ generate: @escaping @Sendable () -> Date) {
    self.generate = generate
  }

  /// The current date.
  public var now: Date {
    self.generate()
  }

  /// The current date.
  public func callAsFunction() -> Date {
    self.generate()
  }

  /// Always the same date.
  public static func constant(_ date: Date) -> Self {
    Self { date }
  }
}

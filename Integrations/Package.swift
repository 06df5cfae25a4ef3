// swift-tools-version: 6.2
import Foundation
import PackageDescription

// NB: a path dependency is identified by its folder's name, which is whatever a clone is called.
let core = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
  .lastPathComponent

// The companion package: the core (by path, so a clone builds as one) and the swift-server
// ecosystem's own packages. The core never imports anything from here.
let package = Package(
  name: "UnidirectionalIntegrations",
  platforms: [.macOS(.v15)],
  products: [
    .library(name: "UnidirectionalServer", targets: ["UnidirectionalServer"]),
    .library(name: "UnidirectionalSQLite", targets: ["UnidirectionalSQLite"]),
    .library(name: "UnidirectionalPostgres", targets: ["UnidirectionalPostgres"]),
    .executable(name: "cart-server", targets: ["CartServer"]),
    .executable(name: "readme-server", targets: ["ReadmeServer"]),
    .executable(name: "storage-benchmarks", targets: ["StorageBenchmarks"]),
    .executable(name: "session-http-benchmark", targets: ["SessionHTTPBenchmark"]),
  ],
  dependencies: [
    .package(path: ".."),
    .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1"),
    .package(url: "https://github.com/apple/swift-http-types.git", from: "1.4.0"),
    .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
    .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
    .package(url: "https://github.com/apple/swift-metrics", from: "2.13.0"),
    .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.4.1"),
    .package(url: "https://github.com/apple/swift-distributed-tracing", from: "1.7.3"),
    .package(url: "https://github.com/vapor/postgres-nio", from: "1.33.2"),
    .package(url: "https://github.com/groue/GRDB.swift", from: "7.10.0"),
    .package(url: "https://github.com/swift-server/async-http-client", from: "1.37.0"),
    .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.3"),
    .package(url: "https://github.com/apple/swift-nio-extras.git", from: "1.35.2"),
    .package(url: "https://github.com/apple/swift-nio-ssl.git", from: "2.37.6"),
  ],
  targets: [
    .target(
      name: "UnidirectionalServer",
      dependencies: [
        .product(name: "Unidirectional", package: core),
        .product(name: "Hummingbird", package: "hummingbird"),
        .product(name: "AsyncHTTPClient", package: "async-http-client"),
        .product(name: "HTTPTypes", package: "swift-http-types"),
        .product(name: "NIOCore", package: "swift-nio"),
        .product(name: "NIOHTTP1", package: "swift-nio"),
        .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
        .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
        .product(name: "Logging", package: "swift-log"),
        .product(name: "Metrics", package: "swift-metrics"),
        .product(name: "Tracing", package: "swift-distributed-tracing"),
      ]
    ),
    .target(
      name: "UnidirectionalSQLite",
      dependencies: [
        .product(name: "Unidirectional", package: core),
        .product(name: "GRDB", package: "GRDB.swift"),
        .product(name: "Logging", package: "swift-log"),
      ]
    ),
    .target(
      name: "UnidirectionalPostgres",
      dependencies: [
        .product(name: "Unidirectional", package: core),
        .product(name: "PostgresNIO", package: "postgres-nio"),
        .product(name: "Logging", package: "swift-log"),
      ]
    ),
    .executableTarget(
      name: "CartServer",
      dependencies: [
        "UnidirectionalServer", "UnidirectionalSQLite", "UnidirectionalPostgres",
        .product(name: "Unidirectional", package: core),
        .product(name: "Hummingbird", package: "hummingbird"),
        .product(name: "HTTPTypes", package: "swift-http-types"),
        .product(name: "AsyncHTTPClient", package: "async-http-client"),
        .product(name: "PostgresNIO", package: "postgres-nio"),
        .product(name: "NIOCore", package: "swift-nio"),
        .product(name: "NIOSSL", package: "swift-nio-ssl"),
        .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
        .product(name: "Logging", package: "swift-log"),
        .product(name: "Metrics", package: "swift-metrics"),
        .product(name: "Prometheus", package: "swift-prometheus"),
      ]
    ),
    .executableTarget(
      name: "ReadmeServer",
      dependencies: [
        "UnidirectionalServer", "UnidirectionalSQLite",
        .product(name: "Unidirectional", package: core),
        .product(name: "Hummingbird", package: "hummingbird"),
        .product(name: "Logging", package: "swift-log"),
      ]
    ),
    .executableTarget(
      name: "StorageBenchmarks",
      dependencies: [
        "UnidirectionalSQLite", "UnidirectionalPostgres",
        .product(name: "Unidirectional", package: core),
        .product(name: "GRDB", package: "GRDB.swift"),
        .product(name: "PostgresNIO", package: "postgres-nio"),
      ]
    ),
    .executableTarget(
      name: "SessionHTTPBenchmark",
      dependencies: [
        "UnidirectionalServer",
        .product(name: "Unidirectional", package: core),
        .product(name: "Hummingbird", package: "hummingbird"),
        .product(name: "Logging", package: "swift-log"),
        .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
      ]
    ),
    .testTarget(
      name: "IntegrationsTests",
      dependencies: [
        "CartServer", "ReadmeServer", "SessionHTTPBenchmark", "UnidirectionalServer",
        "UnidirectionalSQLite",
        "UnidirectionalPostgres",
        .product(name: "Unidirectional", package: core),
        .product(name: "HummingbirdTesting", package: "hummingbird"),
        .product(name: "HTTPTypes", package: "swift-http-types"),
        .product(name: "ServiceLifecycleTestKit", package: "swift-service-lifecycle"),
        .product(name: "InMemoryLogging", package: "swift-log"),
        .product(name: "MetricsTestKit", package: "swift-metrics"),
        .product(name: "Prometheus", package: "swift-prometheus"),
        .product(name: "InMemoryTracing", package: "swift-distributed-tracing"),
        .product(name: "NIOCore", package: "swift-nio"),
        .product(name: "PostgresNIO", package: "postgres-nio"),
      ]
    ),
  ],
  swiftLanguageModes: [.v6]
)

// swift-tools-version: 6.2

import PackageDescription

let package = Package(
  name: "Unidirectional",
  platforms: [.macOS(.v15)],  // NB: Linux is primary; macOS 15 for `Synchronization.Atomic`.
  products: [
    .library(name: "Unidirectional", targets: ["Unidirectional"]),
    .library(name: "UnidirectionalTesting", targets: ["UnidirectionalTesting"]),
    .executable(name: "nth-prime", targets: ["NthPrime"]),
    .executable(name: "effects-basics", targets: ["EffectsBasics"]),
    .executable(name: "line-server", targets: ["LineServer"]),
    .executable(name: "readme-example", targets: ["ReadmeExample"]),
  ],
  targets: [
    .target(name: "CUnidirectional"),
    .target(name: "Unidirectional", dependencies: ["CUnidirectional"]),
    .target(name: "CUnidirectionalTesting"),
    .target(
      name: "UnidirectionalTesting",
      dependencies: ["Unidirectional", "CUnidirectionalTesting"]
    ),
    .target(
      name: "ExampleFeatures",
      dependencies: ["Unidirectional"],
      path: "Sources/Examples/ExampleFeatures"
    ),
    .executableTarget(
      name: "NthPrime",
      dependencies: ["ExampleFeatures", "Unidirectional"],
      path: "Sources/Examples/NthPrime"
    ),
    .executableTarget(
      name: "EffectsBasics",
      dependencies: ["ExampleFeatures", "Unidirectional"],
      path: "Sources/Examples/EffectsBasics"
    ),
    .target(
      name: "LineServerCore",
      dependencies: ["ExampleFeatures", "Unidirectional"],
      path: "Sources/Examples/LineServerCore"
    ),
    .executableTarget(
      name: "LineServer",
      dependencies: ["LineServerCore"],
      path: "Sources/Examples/LineServer"
    ),
    .executableTarget(
      name: "ReadmeExample",
      dependencies: ["Unidirectional"],
      path: "Sources/Examples/ReadmeExample"
    ),
    .target(name: "CMallocStats"),
    .target(name: "CAllocationCounter"),
    .executableTarget(
      name: "AllocationGates",
      dependencies: ["Unidirectional", "CAllocationCounter"]
    ),
    .executableTarget(
      name: "Benchmarks",
      dependencies: ["Unidirectional", "UnidirectionalTesting", "CMallocStats"],
      path: "Benchmarks",
      // The log of what moved the figures (DESIGN.md's *Performance* keeps the latest run).
      exclude: ["HISTORY.md"]
    ),
    .testTarget(
      name: "UnidirectionalTests",
      dependencies: ["Unidirectional", "UnidirectionalTesting", "CMallocStats"]
    ),
    .testTarget(
      name: "UnidirectionalTestingTests",
      dependencies: ["Unidirectional", "UnidirectionalTesting"]
    ),
    .testTarget(
      name: "ExamplesTests",
      dependencies: [
        "ExampleFeatures", "NthPrime", "EffectsBasics", "LineServerCore", "ReadmeExample",
        "Unidirectional", "UnidirectionalTesting",
      ]
    ),
  ],
  swiftLanguageModes: [.v6]
)

for target in package.targets
where !["CMallocStats", "CAllocationCounter", "CUnidirectional", "CUnidirectionalTesting"]
  .contains(target.name)
{
  target.swiftSettings =
    (target.swiftSettings ?? []) + [
      .enableUpcomingFeature("ExistentialAny"),
      .enableUpcomingFeature("ImmutableWeakCaptures"),
      .enableUpcomingFeature("InferIsolatedConformances"),
      .enableUpcomingFeature("InternalImportsByDefault"),
      .enableUpcomingFeature("MemberImportVisibility"),
      .enableUpcomingFeature("NonisolatedNonsendingByDefault"),
    ]
}

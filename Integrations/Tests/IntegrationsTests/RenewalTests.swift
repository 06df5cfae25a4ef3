import Foundation
import Testing
import Unidirectional
import UnidirectionalPostgres
import UnidirectionalSQLite

@testable import CartServer

/// Renews more leases than one statement extends, with leases lost in the first chunk, on a
/// chunk's boundary and in the last: exactly those are reported, and every other lease is kept.
func checkRenewalInChunks(
  _ storage: any SessionStorage<String, Cart.State>,
  chunk: Int,
  expire: @Sendable (String) async throws -> Void
) async throws {
  let count = chunk * 2 + 100
  var leases: [SessionLease<String>] = []
  for index in 0..<count {
    guard case .acquired(let token, _, _) = try await storage.acquire("k\(index)", owner: "a")
    else {
      Issue.record("k\(index) was not acquired")
      return
    }
    leases.append(SessionLease(key: "k\(index)", token: token))
  }
  let taken = ["k5", "k\(chunk - 1)", "k\(chunk)", "k\(count - 1)"]
  for key in taken {
    try await expire(key)
    guard case .acquired = try await storage.acquire(key, owner: "b") else {
      Issue.record("\(key) was not taken over")
      return
    }
  }
  let lost = try await storage.renew(leases.shuffled(), owner: "a")
  #expect(Set(lost) == Set(taken))
  #expect(lost.count == taken.count)
  // A renewed lease is still a's: another owner is refused it.
  for key in ["k0", "k\(chunk + 1)", "k\(count - 2)"] {
    let other = try await storage.acquire(key, owner: "b")
    #expect(other.holder == "a", "\(key): \(other)")
  }
}

@Suite(.timeLimit(.minutes(2))) struct RenewalTests {
  @Test func sqliteRenewsManyLeasesInChunksAndReportsEveryOneLost() async throws {
    let directory = try temporaryDirectory()
    defer { try? FileManager.default.removeItem(at: directory) }
    let path = directory.appendingPathComponent("carts.sqlite").path
    let storage = try await SQLiteSessionStorage<String, Cart.State>(path: path)
    try await checkRenewalInChunks(
      storage,
      chunk: SQLiteSessionStorage<String, Cart.State>.renewalChunk
    ) { key in
      try sqlite(path, "UPDATE sessions SET lease_expiry = 0 WHERE key = '\(key)'")
    }
  }

  @Test(.enabled(if: postgresURL != nil, "POSTGRES_URL is not set: no PostgreSQL to test against"))
  func postgresRenewsManyLeasesInChunksAndReportsEveryOneLost() async throws {
    try await withPostgres { client, table in
      let storage = try await PostgresSessionStorage<String, Cart.State>(
        client: client,
        table: table
      )
      try await checkRenewalInChunks(
        storage,
        chunk: PostgresSessionStorage<String, Cart.State>.renewalChunk
      ) { key in
        try await client.query(
          "UPDATE \(unescaped: table) SET lease_expires_at = now() - interval '1 second' WHERE key = \(key)"
        )
      }
    }
  }
}

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
    let token = try #require(
      try await storage.acquire("k\(index)", owner: "a").token,
      "k\(index) was not acquired"
    )
    leases.append(SessionLease(key: "k\(index)", token: token))
  }
  let taken = ["k5", "k\(chunk - 1)", "k\(chunk)", "k\(count - 1)"]
  for key in taken {
    try await expire(key)
    _ = try #require(try await storage.acquire(key, owner: "b").token, "\(key) was not taken over")
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
      try expireSQLiteLease(on: key, path)
    }
  }

  @Test(.enabled(if: postgresURL != nil, "POSTGRES_URL is not set: no PostgreSQL to test against"))
  func postgresRenewsManyLeasesInChunksAndReportsEveryOneLost() async throws {
    try await withPostgresStorage { client, table, storage in
      try await checkRenewalInChunks(
        storage,
        chunk: PostgresSessionStorage<String, Cart.State>.renewalChunk
      ) { key in
        try await expireLease(on: key, table: table, client)
      }
    }
  }
}

/// A storage that keeps leases by owner liveness: a renewal changes no session row (`rows`, each
/// row's version), a live owner keeps a lease whose row's expiry is past, and once the owner is
/// not alive another takes its key, which the owner's next renewal reports lost, alone.
func checkOwnerLiveness(
  _ storage: any SessionStorage<String, Cart.State>,
  rows: @Sendable () async throws -> [String: String],
  expireRows: @Sendable () async throws -> Void,
  expireOwner: @Sendable (String) async throws -> Void
) async throws {
  var leases: [SessionLease<String>] = []
  for key in ["k0", "k1", "k2"] {
    let token = try #require(
      try await storage.acquire(key, owner: "a").token,
      "\(key) was not acquired"
    )
    leases.append(SessionLease(key: key, token: token))
  }
  let write = SessionWrite(key: "k0", state: Cart.State(customer: "k0"), token: leases[0].token)
  #expect(try await storage.save([write], owner: "a") == [.saved])
  let before = try await rows()
  #expect(try await storage.renew(leases, owner: "a").isEmpty)
  #expect(try await rows() == before)
  // The rows' own expiry past, the owner's liveness keeps them, and says for how long.
  try await expireRows()
  let held = try await storage.acquire("k0", owner: "b")
  guard case .heldBy("a", _, let left?) = held else {
    Issue.record("k0 went to another owner while a was alive: \(held)")
    return
  }
  #expect(left > .seconds(5) && left <= .seconds(10))
  #expect(try await storage.erase("k0", token: nil, owner: "b") == .staleToken(currentOwner: "a"))
  // Once the owner is no longer alive, another takes its key, and the owner's next renewal
  // reports that key, and only that one, lost.
  try await expireOwner("a")
  _ = try #require(
    try await storage.acquire("k0", owner: "b").token,
    "k0 was not taken over once a was no longer alive"
  )
  #expect(try await storage.renew(leases.shuffled(), owner: "a") == ["k0"])
  // Alive again, the owner keeps the rest, and its stale save of the lost key is refused.
  let other = try await storage.acquire("k1", owner: "b")
  #expect(other.holder == "a", "\(other)")
  #expect(try await storage.save([write], owner: "a") == [.staleToken(currentOwner: "b")])
}

/// PostgreSQL keeps a lease while its owner is alive: a renewal writes one row, not one per key.
@Suite(
  .timeLimit(.minutes(2)),
  .enabled(if: postgresURL != nil, "POSTGRES_URL is not set: no PostgreSQL to test against")
)
struct OwnerLivenessTests {
  @Test func aRenewalWritesNoSessionRowAndALiveOwnerKeepsEveryLease() async throws {
    try await withPostgresStorage { client, table, storage in
      try await checkOwnerLiveness(
        storage,
        rows: {
          var versions: [String: String] = [:]
          let rows = try await client.query(
            "SELECT key, xmin::text || lease_expires_at::text FROM \(unescaped: table)"
          )
          for try await (key, version) in rows.decode((String, String).self) {
            versions[key] = version
          }
          return versions
        },
        expireRows: {
          try await client.query(
            "UPDATE \(unescaped: table) SET lease_expires_at = now() - interval '1 second'"
          )
        },
        expireOwner: { owner in
          try await client.query(
            """
            UPDATE \(unescaped: table)_owners SET alive_until = now() - interval '1 second'
            WHERE owner = \(owner)
            """
          )
        }
      )
    }
  }

  @Test func aSaveMovesItsRowsExpiryOnSoAnEarlierReleaseStillSeesTheKeyHeld() async throws {
    // An instance of the release before kept leases by their rows alone; while it runs beside
    // this one (a rolling deploy), a key this one saves stays held in its eyes too.
    try await withPostgresStorage { client, table, storage in
      let token = try #require(
        try await storage.acquire("alice", owner: "a").token,
        "alice was not acquired"
      )
      try await client.query(
        "UPDATE \(unescaped: table) SET lease_expires_at = now() + interval '1 second'"
      )
      let write = SessionWrite(key: "alice", state: Cart.State(customer: "alice"), token: token)
      #expect(try await storage.save([write], owner: "a") == [.saved])
      let rows = try await client.query(
        """
        SELECT (lease_expires_at > now() + interval '9 seconds')
        FROM \(unescaped: table) WHERE key = 'alice'
        """
      )
      var movedOn: [Bool] = []
      for try await moved in rows.decode(Bool.self) { movedOn.append(moved) }
      #expect(movedOn == [true])
    }
  }
}

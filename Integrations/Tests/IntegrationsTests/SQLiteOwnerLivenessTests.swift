import Foundation
import GRDB
import Testing
import Unidirectional
import UnidirectionalSQLite

@testable import CartServer

/// Ends the lease on `key` as waiting out its expiry would: its row's expiry and its owner's
/// liveness (so the owner's other leases end too, unless their rows' own expiry is ahead).
func expireSQLiteLease(on key: String, _ path: String, table: String = "sessions") throws {
  try sqlite(
    path,
    """
    UPDATE \(table)_owners SET alive_until = 0
    WHERE owner = (SELECT owner FROM \(table) WHERE key = '\(key)')
    """
  )
  try sqlite(path, "UPDATE \(table) SET lease_expiry = 0 WHERE key = '\(key)'")
}

/// SQLite keeps a lease while its owner is alive, as PostgreSQL does: a renewal writes one row,
/// not one per key.
@Suite(.timeLimit(.minutes(2))) struct SQLiteOwnerLivenessTests {
  @Test func aRenewalWritesNoSessionRowAndALiveOwnerKeepsEveryLease() async throws {
    let directory = try temporaryDirectory()
    defer { try? FileManager.default.removeItem(at: directory) }
    let path = directory.appendingPathComponent("carts.sqlite").path
    let storage = try await SQLiteSessionStorage<String, Cart.State>(path: path)
    var leases: [SessionLease<String>] = []
    for key in ["k0", "k1", "k2"] {
      guard case .acquired(let token, _, _) = try await storage.acquire(key, owner: "a") else {
        Issue.record("\(key) was not acquired")
        return
      }
      leases.append(SessionLease(key: key, token: token))
    }
    let write = SessionWrite(key: "k0", state: Cart.State(customer: "k0"), token: leases[0].token)
    #expect(try await storage.save([write], owner: "a") == [.saved])
    let reader = try DatabaseQueue(path: path)
    @Sendable func rows() async throws -> [[String]] {
      try await reader.read { db in
        try Row.fetchAll(db, sql: "SELECT * FROM sessions ORDER BY key").map { row in
          row.databaseValues.map(\.description)
        }
      }
    }
    let before = try await rows()
    #expect(try await storage.renew(leases, owner: "a").isEmpty)
    #expect(try await rows() == before)
    // The rows' own expiry past, the owner's liveness keeps them, and says for how long.
    try sqlite(path, "UPDATE sessions SET lease_expiry = 0")
    let held = try await storage.acquire("k0", owner: "b")
    guard case .heldBy("a", _, let left?) = held else {
      Issue.record("k0 went to another owner while a was alive: \(held)")
      return
    }
    #expect(left > .seconds(5) && left <= .seconds(10))
    #expect(try await storage.erase("k0", token: nil, owner: "b") == .staleToken(currentOwner: "a"))
    // Once the owner is no longer alive, another takes its key, and the owner's next renewal
    // reports that key, and only that one, lost.
    try sqlite(path, "UPDATE sessions_owners SET alive_until = 0 WHERE owner = 'a'")
    guard case .acquired = try await storage.acquire("k0", owner: "b") else {
      Issue.record("k0 was not taken over once a was no longer alive")
      return
    }
    #expect(try await storage.renew(leases.shuffled(), owner: "a") == ["k0"])
    // Alive again, the owner keeps the rest, and its stale save of the lost key is refused.
    let other = try await storage.acquire("k1", owner: "b")
    #expect(other.holder == "a", "\(other)")
    #expect(try await storage.save([write], owner: "a") == [.staleToken(currentOwner: "b")])
  }

  @Test func aSaveMovesItsRowsExpiryOnSoAnEarlierReleaseStillSeesTheKeyHeld() async throws {
    // An instance of the release before kept leases by their rows alone; while it runs beside
    // this one (a rolling deploy), a key this one saves stays held in its eyes too.
    let directory = try temporaryDirectory()
    defer { try? FileManager.default.removeItem(at: directory) }
    let path = directory.appendingPathComponent("carts.sqlite").path
    let storage = try await SQLiteSessionStorage<String, Cart.State>(path: path)
    guard case .acquired(let token, _, _) = try await storage.acquire("alice", owner: "a") else {
      Issue.record("alice was not acquired")
      return
    }
    try sqlite(path, "UPDATE sessions SET lease_expiry = 0")
    let write = SessionWrite(key: "alice", state: Cart.State(customer: "alice"), token: token)
    #expect(try await storage.save([write], owner: "a") == [.saved])
    let reader = try DatabaseQueue(path: path)
    let expiry = try await reader.read { db in
      try Double.fetchOne(db, sql: "SELECT lease_expiry FROM sessions WHERE key = 'alice'")
    }
    #expect(try #require(expiry) > Date().timeIntervalSince1970 + 9)
  }

  @Test func anOwnersTableOfAnotherShapeIsRefusedNamingIt() async throws {
    let directory = try temporaryDirectory()
    defer { try? FileManager.default.removeItem(at: directory) }
    let path = directory.appendingPathComponent("carts.sqlite").path
    try sqlite(path, "CREATE TABLE sessions_owners (owner TEXT PRIMARY KEY, alive TEXT)")
    let error = await #expect(throws: SQLiteSessionStorageError.self) {
      _ = try await SQLiteSessionStorage<String, Cart.State>(path: path)
    }
    #expect(
      error?.description.contains("'sessions_owners'") == true,
      "\(String(describing: error))"
    )
    #expect(error?.description.contains("alive TEXT") == true)
  }
}

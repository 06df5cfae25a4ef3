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
    let reader = try DatabaseQueue(path: path)
    try await checkOwnerLiveness(
      storage,
      rows: {
        try await reader.read { db in
          var rows: [String: String] = [:]
          for row in try Row.fetchAll(db, sql: "SELECT * FROM sessions") {
            rows[row["key"]] = row.databaseValues.map(\.description).joined(separator: " ")
          }
          return rows
        }
      },
      expireRows: { try sqlite(path, "UPDATE sessions SET lease_expiry = 0") },
      expireOwner: { owner in
        try sqlite(path, "UPDATE sessions_owners SET alive_until = 0 WHERE owner = '\(owner)'")
      }
    )
  }

  @Test func aSaveMovesItsRowsExpiryOnSoAnEarlierReleaseStillSeesTheKeyHeld() async throws {
    // An instance of the release before kept leases by their rows alone; while it runs beside
    // this one (a rolling deploy), a key this one saves stays held in its eyes too.
    let directory = try temporaryDirectory()
    defer { try? FileManager.default.removeItem(at: directory) }
    let path = directory.appendingPathComponent("carts.sqlite").path
    let storage = try await SQLiteSessionStorage<String, Cart.State>(path: path)
    let token = try #require(
      try await storage.acquire("alice", owner: "a").token,
      "alice was not acquired"
    )
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

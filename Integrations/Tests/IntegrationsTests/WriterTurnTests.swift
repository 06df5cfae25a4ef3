import Foundation
import Testing
import Unidirectional

@testable import CartServer
@testable import UnidirectionalSQLite

/// SQLite's saves take turns: one at a time takes, encodes and writes its batch, in the order they
/// asked, and a save that fails still passes the turn on.
@Suite(.timeLimit(.minutes(2))) struct WriterTurnTests {
  @Test func theTurnIsOneSavesAtATimeAndPassesInTheOrderAsked() async {
    let turn = WriterTurn()
    let log = LockIsolated([String]())
    let first = await turn.acquire()
    let second = Task {
      let hold = await turn.acquire()
      log.withValue { $0.append("second") }
      hold.release()
    }
    await turn.waitUntilWaiting(1)
    let third = Task {
      let hold = await turn.acquire()
      log.withValue { $0.append("third") }
      hold.release()
    }
    await turn.waitUntilWaiting(2)
    log.withValue { $0.append("first") }
    first.release()
    // Released again (the commit passed it on, then the save's exit), it passes nothing more.
    first.release()
    await second.value
    await third.value
    #expect(log.value == ["first", "second", "third"])
    // Free again: the next save has it at once.
    await turn.acquire().release()
  }

  @Test func savesThatTakeLateWriteEachBatchWholeAndAnEmptyOneWritesNothing() async throws {
    let directory = try temporaryDirectory()
    defer { try? FileManager.default.removeItem(at: directory) }
    let path = directory.appendingPathComponent("carts.sqlite").path
    let storage = try await SQLiteSessionStorage<String, Cart.State>(path: path)
    var tokens: [String: UInt64] = [:]
    for key in (0..<8).map({ "k\($0)" }) {
      let token = try #require(
        try await storage.acquire(key, owner: "a").token,
        "\(key) was not acquired"
      )
      tokens[key] = token
    }
    let taken = tokens
    let results = try await withThrowingTaskGroup(of: [SessionSaveResult].self) { group in
      for half in [0..<4, 4..<8] {
        group.addTask {
          try await storage.save(owner: "a") {
            half.map { index in
              var cart = Cart.State(customer: "k\(index)")
              cart.items = ["apple": index]
              return SessionWrite(key: "k\(index)", state: cart, token: taken["k\(index)"]!)
            }
          }
        }
      }
      return try await group.reduce(into: []) { $0 += $1 }
    }
    #expect(results == Array(repeating: .saved, count: 8))
    for index in 0..<8 {
      #expect(try await storage.load("k\(index)")?.items == ["apple": index])
    }
    let none = try await storage.save(owner: "a") { [] }
    #expect(none.isEmpty)
  }

  @Test func aSaveThatFailsPassesTheTurnOn() async throws {
    let directory = try temporaryDirectory()
    defer { try? FileManager.default.removeItem(at: directory) }
    let path = directory.appendingPathComponent("carts.sqlite").path
    let storage = try await SQLiteSessionStorage<String, Cart.State>(path: path)
    let token = try #require(
      try await storage.acquire("alice", owner: "a").token,
      "alice was not acquired"
    )
    try sqlite(path, "DROP TABLE sessions")
    let write = SessionWrite(key: "alice", state: Cart.State(customer: "alice"), token: token)
    // Each save throws; had the first kept the turn, the second would wait for it for good.
    for _ in 0..<2 {
      await #expect(throws: (any Error).self) {
        _ = try await storage.save(owner: "a") { [write] }
      }
    }
  }
}

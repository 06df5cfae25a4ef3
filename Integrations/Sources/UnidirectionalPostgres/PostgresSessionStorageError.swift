/// What went wrong with a ``PostgresSessionStorage``.
public enum PostgresSessionStorageError: Error, CustomStringConvertible {
  /// The table name is not a plain lowercase identifier.
  case invalidTable(String)
  /// A state version below 1, or past what PostgreSQL's `integer` holds.
  case invalidStateVersion(Int)
  /// Fewer than one save in flight.
  case invalidConcurrentSaves(Int)
  /// A lease duration that is not positive.
  case invalidLeaseDuration(Duration)
  /// The database could not be reached, or a statement failed.
  case databaseUnavailable(String)
  /// The table exists with other columns.
  case schemaMismatch(table: String, expected: [String], found: [String])
  /// A key longer than ``PostgresSessionStorage/maximumKeyLength``.
  case keyTooLong(key: String, length: Int)
  /// A key with a NUL character, which PostgreSQL's `text` cannot hold.
  case keyContainsNUL(key: String)
  /// A state larger than ``PostgresSessionStorage/maximumStateSize`` once encoded.
  case stateTooLarge(key: String, size: Int)

  /// What went wrong, and what to do.
  public var description: String {
    switch self {
    case .invalidTable(let table):
      "'\(table)' is not a valid table name (lowercase letters, digits and '_', at most 56)"
    case .invalidStateVersion(let version):
      "the state version must be from 1 to 2147483647, not \(version)"
    case .invalidConcurrentSaves(let count):
      "concurrentSaves must be at least 1, not \(count)"
    case .invalidLeaseDuration(let duration):
      "the lease duration must be positive, not \(duration)"
    case .databaseUnavailable(let reason):
      "the PostgreSQL database failed: \(reason)"
    case .schemaMismatch(let table, let expected, let found):
      """
      the table '\(table)' has columns [\(found.joined(separator: ", "))]; expected \
      [\(expected.joined(separator: ", "))]: use another table, or migrate this one
      """
    case .keyTooLong(let key, let length):
      "the key '\(key)…' is \(length) bytes long; Postgres sessions take keys up to 1024 bytes"
    case .keyContainsNUL(let key):
      "the key '\(key.replacingOccurrences(of: "\0", with: "\\0"))' contains a NUL character, which PostgreSQL's text cannot hold"
    case .stateTooLarge(let key, let size):
      "the state of '\(key)' is \(size) bytes once encoded; Postgres sessions take up to 64 MiB"
    }
  }
}

import PostgresNIO

extension [PostgresRow] {
  /// Each row's one column, decoded.
  func decoded<Column: PostgresDecodable>(_: Column.Type) throws -> [Column] {
    try self.map { try $0.decode(Column.self) }
  }

  /// Each row's columns, decoded.
  func decoded<each Column: PostgresDecodable>(
    _ columns: (repeat each Column).Type
  ) throws -> [(repeat each Column)] {
    try self.map { try $0.decode(columns) }
  }
}

/// Why migrating failed: which component and version, and what Postgres said.
package struct MigrationError: Error, CustomStringConvertible {
    package var component: String
    package var version: Int?
    package var message: String
    package var description: String {
        "migration \(component)" + (version.map { " \($0)" } ?? "") + ": \(message)"
    }
}

import Foundation

/// The migrations of one component (`platform` for ServiceKit's own tables, or a service), applied in order.
package struct MigrationSet: Sendable {
    package var component: String
    package var migrations: [Migration]

    package init(component: String, migrations: [Migration]) {
        self.component = component
        self.migrations = migrations.sorted { $0.version < $1.version }
    }

    /// Reads `NNNN_name.sql` files from a directory (a resource folder of the component's bundle).
    package init(component: String, directory: URL) throws {
        let files = try FileManager.default.contentsOfDirectory(at: directory, includingPropertiesForKeys: nil)
            .filter { $0.pathExtension == "sql" }
        var migrations: [Migration] = []
        for file in files {
            let base = file.deletingPathExtension().lastPathComponent
            let parts = base.split(separator: "_", maxSplits: 1)
            guard parts.count == 2, let version = Int(parts[0]) else {
                throw MigrationError(
                    component: component, version: nil, message: "\(file.lastPathComponent) is not named NNNN_name.sql")
            }
            migrations.append(
                Migration(version: version, name: String(parts[1]), sql: try String(contentsOf: file, encoding: .utf8)))
        }
        let versions = migrations.map(\.version)
        guard Set(versions).count == versions.count else {
            throw MigrationError(component: component, version: nil, message: "two migration files share a version")
        }
        self.init(component: component, migrations: migrations)
    }

    /// ServiceKit's own tables (outbox, inbox, dead letters, idempotency), applied first in every schema.
    package static func platform() throws -> MigrationSet {
        try MigrationSet(component: "platform", bundle: .module)
    }
}

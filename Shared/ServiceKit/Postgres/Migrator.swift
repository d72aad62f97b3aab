import Foundation
import Logging
import PostgresNIO

/// One versioned SQL file, e.g. `0003_add_saga.sql`: version 3, name `add_saga`.
package struct Migration: Sendable, Equatable {
    package var version: Int
    package var name: String
    package var sql: String
    /// FNV-1a of the SQL: an applied migration whose file changed afterwards is refused at start-up.
    package var checksum: String {
        String(
            format: "%016llx", sql.utf8.reduce(UInt64(0xcbf2_9ce4_8422_2325)) { ($0 ^ UInt64($1)) &* 0x100_0000_01b3 })
    }

    package init(version: Int, name: String, sql: String) {
        self.version = version
        self.name = name
        self.sql = sql
    }
}

/// Applies migrations into a schema: each pending one once, in its own transaction, under the schema's advisory
/// lock so instances starting together do not race. A migration that creates an extension (a database-wide object)
/// takes a database-wide lock first: services sharing a database may create the same one.
package enum Migrator {
    package static func apply(_ sets: [MigrationSet], schema: String, client: PostgresClient, logger: Logger)
        async throws
    {
        for set in sets {
            for migration in set.migrations {
                try await apply(migration, of: set.component, schema: schema, client: client, logger: logger)
            }
        }
    }

    private static func apply(
        _ migration: Migration, of component: String, schema: String, client: PostgresClient, logger: Logger
    ) async throws {
        let error = { (message: String) in
            MigrationError(component: component, version: migration.version, message: message)
        }
        do {
            try await client.transaction(logger: logger) { connection in
                for lockName in lockNames(of: migration, schema: schema) {
                    try await connection.queryWhileOpen(
                        "SELECT pg_advisory_xact_lock(hashtext(\(lockName)))", logger: logger)
                }
                try await connection.queryWhileOpen(
                    PostgresQuery(unsafeSQL: "CREATE SCHEMA IF NOT EXISTS \"\(schema)\""), logger: logger)
                try await connection.queryWhileOpen(
                    PostgresQuery(unsafeSQL: "SET LOCAL search_path TO \"\(schema)\""), logger: logger)
                try await connection.queryWhileOpen(
                    """
                    CREATE TABLE IF NOT EXISTS schema_migrations (
                        component text NOT NULL,
                        version integer NOT NULL,
                        name text NOT NULL,
                        checksum text NOT NULL,
                        applied_at timestamptz NOT NULL DEFAULT now(),
                        PRIMARY KEY (component, version)
                    )
                    """, logger: logger
                )
                let rows = try await connection.queryWhileOpen(
                    "SELECT checksum FROM schema_migrations WHERE component = \(component) AND version = \(migration.version)",
                    logger: logger
                )
                var applied: String?
                for try await (checksum) in rows.decode(String.self) { applied = checksum }
                if let applied {
                    guard applied == migration.checksum else {
                        throw error(
                            "\(migration.version)_\(migration.name).sql changed after it was applied; add a new migration instead"
                        )
                    }
                    return
                }
                for statement in SQLScript.statements(in: migration.sql) {
                    do {
                        try await connection.queryWhileOpen(PostgresQuery(unsafeSQL: statement), logger: logger)
                    } catch let failure as PSQLError {
                        let excerpt = statement.prefix(120).replacingOccurrences(of: "\n", with: " ")
                        throw error("\(failure.serverInfo?[.message] ?? "\(failure)") in: \(excerpt)")
                    }
                }
                try await connection.queryWhileOpen(
                    """
                    INSERT INTO schema_migrations (component, version, name, checksum)
                    VALUES (\(component), \(migration.version), \(migration.name), \(migration.checksum))
                    """, logger: logger
                )
                logger.info(
                    "applied migration",
                    metadata: [
                        "db.schema": "\(schema)", "migration": "\(component)/\(migration.version)_\(migration.name)",
                    ]
                )
            }
        } catch let failure as MigrationError {
            throw failure
        } catch let failure {
            throw error("\(failure)")
        }
    }

    /// The advisory locks `migration` takes, in this order: the database-wide one if it creates an extension, then
    /// its schema's. Other schemas' migrations run meanwhile (one lock for all made every service of a test run
    /// wait its turn: 693 waits, 1.7 s each on average).
    package static func lockNames(of migration: Migration, schema: String) -> [String] {
        let databaseWide = migration.sql.range(of: "CREATE EXTENSION", options: .caseInsensitive) != nil
        return (databaseWide ? ["delivery-platform.migrations"] : []) + ["delivery-platform.migrations.\(schema)"]
    }
}

import Foundation
import PostgresNIO
import RealtimeTesting
import ServiceKit
import TestSupport
import Testing

@Suite("Migrations on a real Postgres", .timeLimit(.minutes(2)))
struct MigratorTests {
    let first = Migration(
        version: 1, name: "create_things",
        sql: """
            CREATE TABLE things (id serial PRIMARY KEY, name text NOT NULL);
            CREATE FUNCTION shout(t text) RETURNS text LANGUAGE sql AS $$ SELECT upper(t) || '!'; $$;
            INSERT INTO things (name) VALUES ('one');
            """
    )

    @Test("pending migrations are applied once, into the schema, and recorded")
    func appliedOnce() async throws {
        let set = MigrationSet(component: "svc", migrations: [first])
        try await withTestDatabase(migrations: [try .platform(), set]) { database in
            try await Migrator.apply(
                [try .platform(), set], schema: database.schema, client: database.client, logger: database.logger)
            #expect(try await database.scalar("SELECT count(*) FROM things", as: Int.self) == 1)
            #expect(try await database.scalar("SELECT shout(name) FROM things", as: String.self) == "ONE!")
            let recorded = try await database.scalar(
                "SELECT count(*) FROM schema_migrations WHERE component IN ('svc', 'platform')", as: Int.self
            )
            #expect(recorded == (try MigrationSet.platform()).migrations.count + 1)
            let schemaOfTable = try await database.scalar(
                "SELECT table_schema::text FROM information_schema.tables WHERE table_name = 'things' AND table_schema = \(database.schema)",
                as: String.self
            )
            #expect(schemaOfTable == database.schema)
        }
    }

    @Test("a migration changed after it was applied stops the start-up")
    func changedMigrationRefused() async throws {
        try await withTestDatabase(migrations: [MigrationSet(component: "svc", migrations: [first])]) { database in
            var edited = first
            edited.sql += "\nINSERT INTO things (name) VALUES ('two');"
            await #expect {
                try await Migrator.apply(
                    [MigrationSet(component: "svc", migrations: [edited])], schema: database.schema,
                    client: database.client,
                    logger: database.logger
                )
            } throws: { error in
                "\(error)".contains("changed after it was applied")
            }
        }
    }

    @Test("a failing migration leaves nothing half-applied")
    func failingMigrationRollsBack() async throws {
        let broken = Migration(
            version: 2, name: "broken",
            sql: "CREATE TABLE half (id int); INSERT INTO no_such_table VALUES (1);"
        )
        try await withTestDatabase(migrations: [MigrationSet(component: "svc", migrations: [first])]) { database in
            await #expect {
                try await Migrator.apply(
                    [MigrationSet(component: "svc", migrations: [first, broken])], schema: database.schema,
                    client: database.client, logger: database.logger
                )
            } throws: { error in
                "\(error)".contains("svc 2") && "\(error)".contains("no_such_table")
            }
            let half = try await database.scalar(
                "SELECT count(*) FROM information_schema.tables WHERE table_name = 'half' AND table_schema = \(database.schema)",
                as: Int.self
            )
            #expect(half == 0)
            #expect(
                try await database.scalar(
                    "SELECT count(*) FROM schema_migrations WHERE component = 'svc'", as: Int.self) == 1)
        }
    }

    @Test("instances migrating at the same time apply each migration once")
    func concurrentInstances() async throws {
        let schema = uniqueName("race")
        let set = MigrationSet(component: "svc", migrations: [first])
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<4 {
                group.addTask {
                    try await withTestDatabase(schema: schema, migrations: [try .platform(), set]) { _ in }
                }
            }
            try await group.waitForAll()
        }
        let count = try await withTestDatabase(schema: schema, migrations: []) { database in
            try await database.scalar("SELECT count(*) FROM things", as: Int.self)
        }
        #expect(count == 1)
    }

    @Test("a schema's migration waits for that schema's lock only; one creating an extension waits for everyone's")
    func locksPerSchema() async throws {
        let plain = MigrationSet(component: "svc", migrations: [first])
        let creatingExtension = MigrationSet(
            component: "ext",
            migrations: [Migration(version: 1, name: "cube", sql: "CREATE EXTENSION IF NOT EXISTS cube SCHEMA public;")]
        )
        try await withTestDatabase(migrations: []) { held in
            try await withTestDatabase(migrations: []) { other in
                let schemaLocks = Migrator.lockNames(of: first, schema: held.schema)
                #expect(schemaLocks.count == 1)
                let schemaLock = try #require(schemaLocks.first)
                let databaseLock = try #require(
                    Migrator.lockNames(of: creatingExtension.migrations[0], schema: other.schema).first)
                // While `lock` is held, `free` completes and `waiting` waits for it (another suite's service may be
                // waiting for the database-wide lock too); it completes once released.
                func whileHolding(_ lock: String, free: MigrationSet, in freeSchema: Database, waiting: MigrationSet)
                    async throws
                {
                    try await held.client.withConnection { connection in
                        _ = try await connection.query("BEGIN", logger: held.logger)
                        _ = try await connection.query(
                            "SELECT pg_advisory_xact_lock(hashtext(\(lock)))", logger: held.logger)
                        try await Migrator.apply(
                            [free], schema: freeSchema.schema, client: freeSchema.client, logger: freeSchema.logger)
                        let waiter = Task {
                            try await Migrator.apply(
                                [waiting], schema: held.schema, client: held.client, logger: held.logger)
                        }
                        try await eventually(timeout: .seconds(20), "a migration waiting for \(lock)") {
                            try await held.scalar(
                                """
                                SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted
                                AND objid::bigint = hashtext(\(lock))::bigint & 4294967295
                                """, as: Int.self) ?? 0 >= 1
                        }
                        _ = try await connection.query("COMMIT", logger: held.logger)
                        try await waiter.value
                    }
                }
                try await whileHolding(schemaLock, free: plain, in: other, waiting: plain)
                let another = Migration(version: 1, name: "more", sql: "CREATE TABLE more_things (id int);")
                try await whileHolding(
                    databaseLock, free: MigrationSet(component: "more", migrations: [another]), in: other,
                    waiting: creatingExtension)
                #expect(try await held.scalar("SELECT count(*) FROM things", as: Int.self) == 1)
                #expect(
                    try await held.scalar(
                        "SELECT count(*) FROM schema_migrations WHERE component = 'ext'", as: Int.self)
                        == 1)
            }
        }
    }

    @Test("migration files are read from a folder, ordered by version, and badly named files refused")
    func directory() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent(uniqueName("migrations"))
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        try Data("SELECT 2".utf8).write(to: folder.appendingPathComponent("0002_second.sql"))
        try Data("SELECT 1".utf8).write(to: folder.appendingPathComponent("0001_first.sql"))
        try Data("notes".utf8).write(to: folder.appendingPathComponent("README.md"))
        let set = try MigrationSet(component: "svc", directory: folder)
        #expect(set.migrations.map(\.version) == [1, 2])
        #expect(set.migrations.map(\.name) == ["first", "second"])
        try Data("SELECT 3".utf8).write(to: folder.appendingPathComponent("third.sql"))
        #expect(throws: MigrationError.self) { try MigrationSet(component: "svc", directory: folder) }
    }
}

import Contracts
import Foundation
import Testing

/// docs/map.md against the code: the files it names exist, its tables section has a row for every table a
/// migration creates (and no other), and every topic has a row in its consumers table.
@Suite("docs/map.md")
struct MapTests {
    static func map() throws -> String { try Repository.text("docs/map.md") }

    /// The body of the section whose heading is `heading`, up to the next heading of its level.
    static func section(_ heading: String, of markdown: String) throws -> String {
        let body = try #require(markdown.components(separatedBy: "\n\(heading)\n").dropFirst().first)
        return body.components(separatedBy: "\n## ").first ?? body
    }

    /// The first cell of each row of the tables in `markdown`, without its backticks.
    static func firstCells(of markdown: String) -> [String] {
        markdown.split(separator: "\n").filter { $0.hasPrefix("| `") }.map {
            $0.split(separator: "|")[0].trimmingCharacters(in: .whitespaces).split(separator: "`").first.map(
                String.init)
                ?? ""
        }
    }

    @Test("every file it names exists")
    func filesExist() throws {
        let markdown = try Self.map()
        let paths = try Regex(#"`([A-Za-z0-9_+./-]+\.(?:swift|sql|md))`"#)
        var missing: [String] = []
        let sources = Self.fileNames(under: ["Services", "Shared"])
        for match in markdown.matches(of: paths) {
            guard let named = match.output[1].substring.map(String.init) else { continue }
            let exists =
                named.contains("/")
                ? FileManager.default.fileExists(atPath: Repository.root.appendingPathComponent(named).path)
                : sources.contains(named)
            if !exists { missing.append(named) }
        }
        #expect(missing.isEmpty, "named in docs/map.md but not in the repository: \(missing)")
    }

    @Test("its tables section has a row for each table the migrations create, and none for another")
    func tablesAgainstMigrations() throws {
        let created = try Regex(#"CREATE\s+(?:UNLOGGED\s+)?TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?([a-z_]+)"#)
        var tables = Set<String>()
        for file in Repository.files(under: ["Services", "Shared"]) where ["sql", "swift"].contains(file.pathExtension)
        {
            let text = try String(contentsOf: file, encoding: .utf8)
            for match in text.matches(of: created) {
                if let name = match.output[1].substring { tables.insert(String(name)) }
            }
        }
        #expect(tables.count > 20, "the pattern still finds the migrations' tables")
        let rows = Set(Self.firstCells(of: try Self.section("## Tables", of: try Self.map())))
        #expect(tables.subtracting(rows).sorted() == [], "created by a migration, missing from docs/map.md")
        #expect(rows.subtracting(tables).sorted() == [], "in docs/map.md, created by no migration")
    }

    @Test("every topic has a row in the consumers table")
    func everyTopicConsumed() throws {
        let section = try Self.section("### Who consumes them", of: try Self.map())
        let rows = Set(Self.firstCells(of: section))
        #expect(Set(Topic.all.map(\.rawValue)).subtracting(rows).sorted() == [])
    }

    static func fileNames(under folders: [String]) -> Set<String> {
        Set(Repository.files(under: folders).map(\.lastPathComponent))
    }
}

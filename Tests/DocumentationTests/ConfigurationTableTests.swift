import Foundation
import Testing

/// docs/configuration.md against the environment variables the services read (every read goes through
/// `ServiceEnvironment`: `environment.int("NAME", ...)`, `environment.optional("NAME")` and the like).
@Suite("docs/configuration.md's variables")
struct ConfigurationTableTests {
    /// The names the services' and shared modules' sources read, with the first file reading each.
    static func variablesRead() throws -> [String: String] {
        let read = try Regex(#"environment\.[a-zA-Z]+\(\s*"([A-Z][A-Z0-9_]*)""#)
        var names: [String: String] = [:]
        for file in Repository.files(under: ["Services", "Shared"]) where file.pathExtension == "swift" {
            let text = try String(contentsOf: file, encoding: .utf8)
            for match in text.matches(of: read) {
                guard let name = match.output[1].substring.map(String.init), names[name] == nil else { continue }
                names[name] = file.lastPathComponent
            }
        }
        return names
    }

    /// The names in the first column of the document's tables.
    static func variablesDocumented() throws -> Set<String> {
        let markdown = try Repository.text("docs/configuration.md")
        let name = try Regex(#"`([A-Z][A-Z0-9_]*)`"#)
        var names = Set<String>()
        for line in markdown.split(separator: "\n") where line.hasPrefix("| `") {
            let firstCell = line.split(separator: "|")[0]
            for match in firstCell.matches(of: name) {
                if let found = match.output[1].substring { names.insert(String(found)) }
            }
        }
        return names
    }

    @Test("every variable a service reads has a row, and every row names a variable a service reads")
    func bothWays() throws {
        let read = try Self.variablesRead()
        let documented = try Self.variablesDocumented()
        #expect(read.count > 50, "the pattern still finds the reads")
        let undocumented = read.filter { !documented.contains($0.key) }.map { "\($0.key) (\($0.value))" }.sorted()
        #expect(undocumented.isEmpty, "read but not in docs/configuration.md: \(undocumented)")
        let unread = documented.subtracting(read.keys).sorted()
        #expect(unread.isEmpty, "in docs/configuration.md but read by no service: \(unread)")
    }
}

import Foundation
import Testing

/// The protocol library and its testing module as docs/architecture.md describes them: every public declaration
/// documented, and no import of the platform's modules.
@Suite("The realtime library's public API")
struct RealtimeLibraryAPITests {
    static let folders = ["Shared/Realtime", "Shared/RealtimeTesting"]

    static func sources() throws -> [(path: String, lines: [Substring])] {
        try Repository.files(under: folders).filter { $0.pathExtension == "swift" }.map { file in
            let path = String(file.path.dropFirst(Repository.root.path.count + 1))
            return (path, try Repository.text(path).split(separator: "\n", omittingEmptySubsequences: false))
        }
    }

    /// Members a protocol conformance requires, documented by the protocol.
    static let conformanceMembers = [
        "public var description", "public static func ==", "public func hash(into", "public init(from decoder",
        "public func encode(to", "public var rawValue", "public init(rawValue", "public init(stringLiteral",
    ]

    @Test("every public declaration has a doc comment")
    func documented() throws {
        var undocumented: [String] = []
        for (path, lines) in try Self.sources() {
            for (index, line) in lines.enumerated() {
                let declaration = line.trimmingCharacters(in: .whitespaces)
                guard declaration.hasPrefix("public "),
                    !Self.conformanceMembers.contains(where: { declaration.hasPrefix($0) })
                else { continue }
                var above = index - 1
                while above >= 0, lines[above].trimmingCharacters(in: .whitespaces).hasPrefix("@") { above -= 1 }
                if above < 0 || !lines[above].trimmingCharacters(in: .whitespaces).hasPrefix("///") {
                    undocumented.append("\(path):\(index + 1)")
                }
            }
        }
        #expect(undocumented.isEmpty, "public declarations without a doc comment: \(undocumented)")
    }

    @Test("it imports none of the platform's modules")
    func standsAlone() throws {
        let platform: Set<String> = ["Contracts", "ServiceKit", "Kafka", "RealtimePlatform", "TestSupport"]
        var imports: [String] = []
        for (path, lines) in try Self.sources() {
            for line in lines {
                let words = line.split(separator: " ")
                if let module = words.last, words.contains("import"), platform.contains(String(module)) {
                    imports.append("\(path): \(line)")
                }
            }
        }
        #expect(imports.isEmpty, "the library imports the platform: \(imports)")
    }
}

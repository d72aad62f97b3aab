import Foundation
import Testing

@testable import fuzz_parsers

@Suite("Fuzz corpus replay")
struct FuzzCorpusTests {
    static let corpus = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("../../Tools/Fuzz/corpus").standardized.path

    @Test(
        "every committed input of a target passes through it without breaking an invariant",
        arguments: FuzzTarget.allCases)
    func replay(target: FuzzTarget) throws {
        let files = FuzzParsers.inputFiles(Self.corpus + "/" + target.rawValue)
        #expect(files.count >= 10, "the seed corpus of \(target.rawValue) is missing")
        for file in files {
            let bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: file)))
            do throws(FuzzFailure) {
                try target.run(bytes)
            } catch {
                Issue.record("\(file): \(error)")
            }
        }
    }
}

import Foundation
import TestSupport
import Testing

/// Every service's OpenAPI document is valid OpenAPI 3 (checked by openapi-spec-validator from PyPI).
@Suite("OpenAPI documents")
struct OpenAPIDocumentTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    static var documents: [String] {
        let services = root.appendingPathComponent("Services")
        let names = (try? FileManager.default.contentsOfDirectory(atPath: services.path)) ?? []
        return names.sorted().map { services.appendingPathComponent($0).appendingPathComponent("openapi.yaml").path }
            .filter { FileManager.default.fileExists(atPath: $0) }
    }

    @Test("at least the order service documents its API")
    func present() {
        #expect(Self.documents.contains { $0.hasSuffix("OrderService/openapi.yaml") })
    }

    @Test("each document validates", arguments: documents)
    func validates(path: String) async throws {
        let script = """
            import sys
            from openapi_spec_validator import validate
            from openapi_spec_validator.readers import read_from_filename
            document, _ = read_from_filename(sys.argv[1])
            validate(document)
            print("valid")
            """
        let process = try ChildProcess(executable: try TestInfrastructure.python(), arguments: ["-c", script, path])
        let status = await process.exitStatus()
        #expect(status == 0, "\(path): \(process.output)")
    }
}

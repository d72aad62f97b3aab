import AsyncHTTPClient
import Contracts
import Foundation
import NIOCore
import NIOHTTP1
import ServiceKit

/// An HTTP client for a service under test, speaking JSON with bearer tokens.
package struct ServiceClient: Sendable {
    package let port: Int
    package var baseURL: String { "http://127.0.0.1:\(port)" }

    package init(port: Int) { self.port = port }

    package struct Answer: Sendable {
        package var status: Int
        package var headers: [String: String]
        package var body: Data
        package var text: String { String(decoding: body, as: UTF8.self) }

        /// The body decoded as `T` with the contracts' JSON coding.
        package func decode<T: Decodable>(_ type: T.Type) throws -> T {
            try ContractRequestDecoder.decode(type, from: body)
        }

        /// The error code of a JSON error body.
        package var errorCode: String? { try? JSONDecoder().decode(APIError.Body.self, from: body).error.code.rawValue }
    }

    package func request(
        _ method: HTTPMethod, _ path: String, token: String? = nil, body: Data? = nil,
        contentType: String? = "application/json",
        headers extra: [String: String] = [:]
    ) async throws -> Answer {
        var request = HTTPClientRequest(url: baseURL + path)
        request.method = method
        if let token { request.headers.add(name: "Authorization", value: "Bearer \(token)") }
        for (name, value) in extra { request.headers.add(name: name, value: value) }
        if let body {
            request.body = .bytes(ByteBuffer(data: body))
            if let contentType { request.headers.add(name: "Content-Type", value: contentType) }
        }
        let response = try await HTTPClient.shared.execute(request, timeout: .seconds(30))
        let bytes = try await response.body.collect(upTo: 32 << 20)
        var headers: [String: String] = [:]
        for header in response.headers { headers[header.name.lowercased()] = header.value }
        return Answer(status: Int(response.status.code), headers: headers, body: Data(buffer: bytes))
    }

    package func get(_ path: String, token: String? = nil) async throws -> Answer {
        try await request(.GET, path, token: token)
    }

    /// POSTs `body` encoded as JSON (ISO-8601 dates).
    package func post(_ path: String, token: String? = nil, json body: some Encodable, headers: [String: String] = [:])
        async throws -> Answer
    {
        try await request(.POST, path, token: token, body: try ContractCoding.encode(body), headers: headers)
    }

    /// POSTs raw text as the body.
    package func post(
        _ path: String, token: String? = nil, raw: String, contentType: String? = "application/json",
        headers: [String: String] = [:]
    ) async throws -> Answer {
        try await request(.POST, path, token: token, body: Data(raw.utf8), contentType: contentType, headers: headers)
    }
}

/// Runs a service application on its configured port for the duration of `body`.
package func withRunningService<Result: Sendable>(
    _ app: ServiceApplication, _ body: @Sendable (ServiceClient) async throws -> Result
) async throws -> Result {
    try await withRunningServices(app.services, port: app.port) {
        try await body(ServiceClient(port: app.port))
    }
}

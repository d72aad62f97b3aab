import Contracts
import Foundation
import HTTPTypes
import Hummingbird

/// An error answered to the client as `{"error":{"code":"SOME_CODE","message":"...","details":{...}}}`.
/// Every 4xx and 5xx of every service has this shape; apps switch on `code`.
package struct APIError: CodedError, HTTPResponseError, CustomStringConvertible, Sendable {
    package var status: HTTPResponse.Status
    package var code: ErrorCode
    package var message: String
    /// Machine-readable context, e.g. `["currentState": "Preparing"]`.
    package var details: [String: String]
    package var headers: HTTPFields

    package init(
        _ status: HTTPResponse.Status, code: ErrorCode, message: String, details: [String: String] = [:],
        headers: HTTPFields = [:]
    ) {
        self.status = status
        self.code = code
        self.message = message
        self.details = details
        self.headers = headers
    }

    package var description: String { "\(status.code) \(code): \(message)" }

    package func response(from request: Request, context: some RequestContext) throws -> Response {
        Self.response(status: status, body: body, headers: headers)
    }

    /// The JSON body of this error.
    package var body: Body {
        Body(error: .init(code: code, message: message, details: details.isEmpty ? nil : details))
    }

    package struct Body: Codable, Sendable, Equatable {
        package struct Detail: Codable, Sendable, Equatable {
            package var code: ErrorCode
            package var message: String
            package var details: [String: String]?
        }
        package var error: Detail
    }

    static func response(status: HTTPResponse.Status, body: some Encodable, headers: HTTPFields = [:]) -> Response {
        let data = (try? ContractCoding.encode(body)) ?? Data(#"{"error":{"code":"INTERNAL_ERROR","message":""}}"#.utf8)
        var fields = headers
        fields[.contentType] = "application/json; charset=utf-8"
        fields[.contentLength] = String(data.count)
        return Response(status: status, headers: fields, body: .init(byteBuffer: ByteBuffer(bytes: data)))
    }
}

extension APIError {
    package static func badRequest(_ message: String, code: ErrorCode = .badRequest) -> APIError {
        APIError(.badRequest, code: code, message: message)
    }

    package static func validation(_ message: String) -> APIError {
        APIError(.badRequest, code: .validationFailed, message: message)
    }

    package static func unauthorized(_ message: String) -> APIError {
        APIError(.unauthorized, code: .unauthorized, message: message, headers: [.wwwAuthenticate: "Bearer"])
    }

    package static func forbidden(_ message: String, code: ErrorCode = .forbidden) -> APIError {
        APIError(.forbidden, code: code, message: message)
    }

    package static func notFound(_ message: String, code: ErrorCode = .notFound) -> APIError {
        APIError(.notFound, code: code, message: message)
    }

    package static func conflict(_ code: ErrorCode, _ message: String, details: [String: String] = [:]) -> APIError {
        APIError(.conflict, code: code, message: message, details: details)
    }

    package static func unprocessable(_ code: ErrorCode, _ message: String) -> APIError {
        APIError(.unprocessableContent, code: code, message: message)
    }
}

/// An error of the domain (below the HTTP and socket edges), with the answer the edges give for it. Domain code
/// throws its own types; only the edges (``ErrorMiddleware``, socket handlers) turn them into ``APIError``s.
package protocol APIErrorConvertible: CodedError {
    var apiError: APIError { get }
}

extension APIErrorConvertible {
    package var code: ErrorCode { apiError.code }
    package var message: String { apiError.message }
}

extension EventTooLarge: APIErrorConvertible {
    package var apiError: APIError {
        APIError(
            .contentTooLarge, code: .eventTooLarge, message: description,
            details: ["maximumBytes": String(maximumBytes)]
        )
    }
}

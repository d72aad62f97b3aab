import Foundation

/// What was wrong with a JSON body or payload that did not decode, in words a client developer can act on:
/// `INVALID_JSON` (not JSON), `VALIDATION_FAILED` (not the expected shape, naming the field) or
/// `INVALID_CHARACTER` (a NUL character).
package struct DecodingProblem: CodedError, Sendable {
    package var code: ErrorCode
    package var message: String

    /// The problem `error` (anything decoding threw) describes; an error that already has a code keeps it.
    package init(_ error: any Error) {
        switch error {
        case let error as DecodingError: self.init(error)
        case let error as any CodedError: self.init(code: error.code, message: error.message)
        case let error as NULCharacterError: self.init(code: .invalidCharacter, message: error.description)
        default: self.init(code: .invalidJSON, message: "the request body could not be read: \(error)")
        }
    }

    init(code: ErrorCode, message: String) {
        self.code = code
        self.message = message
    }

    init(_ error: DecodingError) {
        func path(_ codingPath: [any CodingKey], _ last: (any CodingKey)? = nil) -> String {
            let keys = codingPath + (last.map { [$0] } ?? [])
            guard !keys.isEmpty else { return "the body" }
            let text = keys.map { $0.intValue.map { "[\($0)]" } ?? ".\($0.stringValue)" }.joined()
            return "'" + (text.hasPrefix(".") ? String(text.dropFirst()) : text) + "'"
        }
        switch error {
        case .keyNotFound(let key, let context):
            (code, message) = (.validationFailed, "missing field \(path(context.codingPath, key))")
        case .valueNotFound(let type, let context):
            (code, message) = (
                .validationFailed, "\(path(context.codingPath)) must be a \(Self.typeName(type)), not null"
            )
        case .typeMismatch(let type, let context):
            (code, message) = (.validationFailed, "\(path(context.codingPath)) must be a \(Self.typeName(type))")
        case .dataCorrupted(let context) where context.codingPath.isEmpty:
            (code, message) = (.invalidJSON, "the body is not valid JSON")
        case .dataCorrupted(let context):
            (code, message) = (.validationFailed, "\(path(context.codingPath)): \(context.debugDescription)")
        @unknown default:
            (code, message) = (.invalidJSON, "the body could not be decoded")
        }
    }

    private static func typeName(_ type: Any.Type) -> String {
        switch type {
        case is String.Type: "string"
        case is Int.Type, is Int64.Type, is Int32.Type: "integer"
        case is Double.Type, is Float.Type, is Decimal.Type: "number"
        case is Bool.Type: "boolean"
        case is [Any].Type: "array"
        default: "\(type)".hasPrefix("Dictionary") ? "object" : "value of the documented shape"
        }
    }
}

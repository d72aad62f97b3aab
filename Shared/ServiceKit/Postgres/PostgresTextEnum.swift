import NIOCore
import PostgresNIO

/// A `String`-backed enum stored in a text column: bind it and decode it like a `String`. (postgres-nio's own
/// `RawRepresentable` support is ambiguous for `Codable` enums, which would also match its JSON coding.)
package protocol PostgresTextEnum: PostgresCodable, RawRepresentable where RawValue == String {}

extension PostgresTextEnum {
    package static var psqlType: PostgresDataType { String.psqlType }
    package static var psqlFormat: PostgresFormat { String.psqlFormat }

    package func encode<Encoder: PostgresJSONEncoder>(
        into byteBuffer: inout ByteBuffer, context: PostgresEncodingContext<Encoder>
    ) {
        rawValue.encode(into: &byteBuffer, context: context)
    }

    package init<Decoder: PostgresJSONDecoder>(
        from buffer: inout ByteBuffer, type: PostgresDataType, format: PostgresFormat,
        context: PostgresDecodingContext<Decoder>
    ) throws {
        guard let value = Self(rawValue: try String(from: &buffer, type: type, format: format, context: context)) else {
            throw PostgresDecodingError.Code.failure
        }
        self = value
    }
}

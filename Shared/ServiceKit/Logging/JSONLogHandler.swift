import Contracts
import Foundation
import Logging
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// Writes one JSON object per line to standard output: `ts`, `level`, `service`, `logger`, `message`, then
/// the metadata (dot-namespaced keys such as `order.id`, `hb.request.id`).
package struct JSONLogHandler: LogHandler {
    package var metadata: Logger.Metadata = [:]
    package var logLevel: Logger.Level
    package var metadataProvider: Logger.MetadataProvider?
    private let label: String
    private let service: String

    package init(label: String, service: String, level: Logger.Level) {
        self.label = label
        self.service = service
        self.logLevel = level
    }

    package subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    package func log(event: LogEvent) {
        let level = event.level
        let message = event.message
        var fields = self.metadata
        if let provided = metadataProvider?.get() { fields.merge(provided) { _, new in new } }
        if let explicit = event.metadata { fields.merge(explicit) { _, new in new } }

        var line = "{\"ts\":\(Self.quoted(ISO8601.format(Date()))),\"level\":\(Self.quoted(level.rawValue))"
        line += ",\"service\":\(Self.quoted(service)),\"logger\":\(Self.quoted(label))"
        line += ",\"message\":\(Self.quoted(message.description))"
        for (key, value) in fields.sorted(by: { $0.key < $1.key }) {
            line += ",\(Self.quoted(key)):\(Self.json(value))"
        }
        line += "}\n"
        StandardOutput.write(line)
    }

    private static func json(_ value: Logger.MetadataValue) -> String {
        switch value {
        case .string(let text): quoted(text)
        case .stringConvertible(let value): quoted(value.description)
        case .array(let values): "[" + values.map(json).joined(separator: ",") + "]"
        case .dictionary(let values):
            "{"
                + values.sorted(by: { $0.key < $1.key }).map { "\(quoted($0.key)):\(json($0.value))" }
                .joined(separator: ",") + "}"
        }
    }

    /// A JSON string literal.
    static func quoted(_ text: String) -> String {
        var result = "\""
        result.reserveCapacity(text.utf8.count + 2)
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": result += "\\\""
            case "\\": result += "\\\\"
            case "\n": result += "\\n"
            case "\r": result += "\\r"
            case "\t": result += "\\t"
            case _ where scalar.value < 0x20:
                result += String(format: "\\u%04x", scalar.value)
            default: result.unicodeScalars.append(scalar)
            }
        }
        return result + "\""
    }
}

/// Serializes whole lines to stdout so concurrent log calls never interleave. A closed stdout (the reader went
/// away) loses the line instead of crashing the service.
enum StandardOutput {
    private static let lock = Mutex(())

    static func write(_ text: String) {
        lock.withLock { _ in
            var text = text
            text.withUTF8 { bytes in
                var offset = 0
                while offset < bytes.count {
                    let written = Glibc.write(STDOUT_FILENO, bytes.baseAddress! + offset, bytes.count - offset)
                    if written > 0 {
                        offset += written
                    } else if written < 0, errno == EINTR {
                        continue
                    } else {
                        return
                    }
                }
            }
        }
    }
}

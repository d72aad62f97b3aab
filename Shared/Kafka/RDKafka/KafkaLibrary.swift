import CRdKafka
import Foundation

/// The librdkafka the process actually loaded (which may differ from the headers it was built against).
package enum KafkaLibrary {
    /// e.g. `2.16.0`.
    package static var version: String { String(cString: rd_kafka_version_str()) }

    /// librdkafka's numeric version, `0xMMmmrrxx`.
    package static var versionNumber: Int32 { rd_kafka_version() }

    /// The file the dynamic linker loaded librdkafka from, read from the process's memory map (Linux).
    package static let path: String? = {
        // /proc files report size 0, so read to the end rather than by size.
        guard let data = FileHandle(forReadingAtPath: "/proc/self/maps")?.readDataToEndOfFile() else { return nil }
        let maps = String(decoding: data, as: UTF8.self)
        for line in maps.split(separator: "\n") where line.contains("librdkafka") {
            if let start = line.firstIndex(of: "/") { return String(line[start...]) }
        }
        return nil
    }()

    /// `librdkafka 2.16.0 (/path/to/librdkafka.so.1)`: logged at start-up and named in broker errors.
    package static var description: String {
        "librdkafka \(version)" + (path.map { " (\($0))" } ?? "")
    }

    /// Debian 12's librdkafka 2.0.2 cannot parse the ApiVersions reply of the Tansu broker used locally.
    package static var isTooOldForTansu: Bool { versionNumber < 0x0201_0000 }
}

extension String {
    /// Text from a NUL-terminated C buffer that librdkafka wrote an error message into.
    init(errorBuffer buffer: [CChar]) {
        let bytes = buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }
        self = String(decoding: bytes, as: UTF8.self)
    }
}

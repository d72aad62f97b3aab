import Contracts
import Foundation

/// What a device token must look like per platform, and how many devices a user keeps.
package enum DeviceRules {
    /// Devices kept per user by default (`MAX_DEVICES_PER_USER`); registering one more drops the least recently
    /// registered, so one account cannot make every push fan out without bound.
    package static let defaultMaximumDevicesPerUser = 10

    /// Why a token is refused.
    package enum TokenProblem: Error, Equatable, CustomStringConvertible {
        case empty
        case tooLong(maximumBytes: Int)
        case malformed(DevicePlatform)

        package var description: String {
            switch self {
            case .empty: "'token' must not be empty"
            case .tooLong(let maximum): "'token' must be at most \(maximum) bytes"
            case .malformed(.ios): "'token' must be an APNs device token: 64 to 200 hexadecimal digits"
            case .malformed(.android):
                "'token' must be an FCM registration token: letters, digits, '-', '_', ':' or '.'"
            }
        }
    }

    /// The longest FCM registration token accepted, in bytes (real ones are about 160-250).
    package static let maximumFCMTokenBytes = 4096

    /// The token trimmed, if it has the shape `platform`'s provider issues: APNs device tokens are hexadecimal
    /// (32 bytes today, so 64 digits; up to 100 bytes allowed for the future); FCM tokens use a URL-safe alphabet.
    package static func validToken(_ text: String, platform: DevicePlatform) throws(TokenProblem) -> String {
        let token = text.trimmingCharacters(in: .whitespacesAndNewlines)
        guard !token.isEmpty else { throw .empty }
        switch platform {
        case .ios:
            guard token.utf8.count <= 200 else { throw .tooLong(maximumBytes: 200) }
            guard token.utf8.count >= 64, token.utf8.count.isMultiple(of: 2), token.utf8.allSatisfy(\.isHexDigit)
            else { throw .malformed(.ios) }
        case .android:
            guard token.utf8.count <= maximumFCMTokenBytes else { throw .tooLong(maximumBytes: maximumFCMTokenBytes) }
            guard token.utf8.allSatisfy(\.isFCMTokenByte) else { throw .malformed(.android) }
        }
        return token
    }

    /// A token as logs may show it: its first 8 characters and its length, never the whole token (a
    /// device token is a credential for pushing to that phone).
    package static func redacted(_ token: String) -> String {
        "\(token.prefix(8))...(\(token.utf8.count) bytes)"
    }
}

extension UInt8 {
    fileprivate var isHexDigit: Bool {
        (0x30...0x39).contains(self) || (0x41...0x46).contains(self) || (0x61...0x66).contains(self)
    }

    fileprivate var isFCMTokenByte: Bool {
        (0x30...0x39).contains(self) || (0x41...0x5A).contains(self) || (0x61...0x7A).contains(self)
            || self == UInt8(ascii: "-") || self == UInt8(ascii: "_") || self == UInt8(ascii: ":")
            || self == UInt8(ascii: ".")
    }
}

/// A device's platform.
package enum DevicePlatform: String, Codable, Sendable, CaseIterable {
    case android
    case ios
}

import AsyncHTTPClient
import Contracts
import Foundation
import JWTKit
import Kafka
import Logging
import NIOCore
import NIOHTTP1
import Synchronization

/// One push to one device.
package struct PushMessage: Sendable, Equatable {
    package var notificationId: String
    package var kind: PushKind
    package var title: String
    package var body: String
    package var data: [String: String]
    package var priority: PushPriority
    package var collapseKey: String?
    package var ttlSeconds: Int?
    package var sound: String?
    /// Run the app's background handler on arrival (``PushRequested/wakesApp``).
    package var wakesApp: Bool
}

/// What a provider made of a push.
package enum PushOutcome: Sendable, Equatable {
    case sent(status: Int, answer: String)
    /// Try again later (429, 5xx, a time-out); `after` is the provider's Retry-After if it gave one.
    case retry(status: Int?, answer: String, after: Duration?)
    /// The device token is dead (FCM UNREGISTERED or an invalid token; APNs 410 or BadDeviceToken).
    case invalidToken(status: Int, answer: String)
    /// Refused for good (another 4xx).
    case failed(status: Int?, answer: String)
}

/// Sends pushes to one platform's devices.
package protocol PushProvider: Sendable {
    /// `fcm`, `apns` or `log`.
    var name: String { get }
    func send(_ message: PushMessage, to token: String) async -> PushOutcome
}

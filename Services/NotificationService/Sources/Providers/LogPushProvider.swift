import AsyncHTTPClient
import Contracts
import Foundation
import JWTKit
import Kafka
import Logging
import NIOCore
import NIOHTTP1
import Synchronization

/// Records what would be sent, for local runs without FCM or APNs credentials: the kind, priority and sizes,
/// never the whole token or the text (a chat preview is the users' words).
package struct LogPushProvider: PushProvider {
    package let name = "log"
    let platform: String
    let logger: Logger

    package func send(_ message: PushMessage, to token: String) async -> PushOutcome {
        logger.info(
            "push (log provider)",
            metadata: [
                "push.platform": "\(platform)", "push.token": "\(DeviceRules.redacted(token))",
                "push.kind": "\(message.kind)", "push.priority": "\(message.priority.rawValue)",
                "push.title.bytes": "\(message.title.utf8.count)", "push.body.bytes": "\(message.body.utf8.count)",
                "push.data.keys": "\(message.data.keys.sorted().joined(separator: ","))",
            ]
        )
        return .sent(status: 200, answer: "logged")
    }
}

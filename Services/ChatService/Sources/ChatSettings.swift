import Contracts
import Foundation
import Realtime
import ServiceKit

/// Chat's settings.
package struct ChatSettings: Sendable {
    /// `CHAT_RATE_LIMIT_PER_SECOND` (default 5) and `CHAT_RATE_LIMIT_BURST` (default 10): events per socket.
    package var rateLimit: SocketIORateLimit
    /// `CHAT_QUICK_REPLIES_FILE`: the templates, JSON `{"customer":[{id,text}],"rider":[...]}`; built-in ones
    /// otherwise.
    package var quickReplies: QuickReplies
    /// How long a socket counts as present in its room without a refresh (its instance refreshes it).
    package var presenceFreshness: Duration = .seconds(90)
    /// `CHAT_PUSH_POLICY`: when a message is also pushed to its recipient.
    package var pushPolicy: ChatPushPolicy
    /// `CHAT_CLOSED_RETENTION_DAYS`, default 30: a closed chat's messages are deleted this long after it closed.
    package var closedRetention: Duration
    /// `CHAT_TEST_KILL_AFTER_SEND` (`true`; tests only): the process kills itself with SIGKILL right after a
    /// message's transaction committed, before it answers, as an instance dying at the worst moment would.
    package var killAfterSend: Bool

    package init(environment: ServiceEnvironment) throws {
        rateLimit = SocketIORateLimit(
            eventsPerSecond: try environment.double("CHAT_RATE_LIMIT_PER_SECOND", default: 5, in: 0.1...10_000),
            burst: try environment.int("CHAT_RATE_LIMIT_BURST", default: 10, in: 1...100_000)
        )
        pushPolicy = try environment.choice("CHAT_PUSH_POLICY", default: ChatPushPolicy.unlessInForeground)
        closedRetention = .seconds(
            86_400 * (try environment.int("CHAT_CLOSED_RETENTION_DAYS", default: 30, in: 1...3650)))
        killAfterSend = try environment.bool("CHAT_TEST_KILL_AFTER_SEND", default: false)
        if let path = environment.optional("CHAT_QUICK_REPLIES_FILE") {
            do {
                quickReplies = try ContractCoding.decode(
                    QuickReplies.self, from: try Data(contentsOf: URL(fileURLWithPath: path)))
            } catch {
                throw ConfigurationError(
                    variable: "CHAT_QUICK_REPLIES_FILE", problem: "\(path) is not a quick-replies JSON file: \(error)")
            }
        } else {
            quickReplies = .standard
        }
    }
}

/// When a chat message is pushed to its recipient as well as sent to their sockets in the room.
package enum ChatPushPolicy: String, Sendable, CaseIterable {
    /// Unless the recipient has a socket in the room whose app is in the foreground (the default): an app that
    /// reported `app_state` background, or has no socket, gets the push.
    case unlessInForeground = "unless_in_foreground"
    /// Every message: the app decides whether to show it.
    case always
}

import Contracts
import Foundation
import Hummingbird
import Logging
import Realtime
import RealtimePlatform
import ServiceKit
import ServiceLifecycle

/// Customer and rider chat for an active order (CUS-032).
package enum ChatService: ServiceDefinition {
    package static let name = "chat-service"
    package static let defaultPort = 8082
    package static let defaultSchema = "chat"

    package static func migrations() throws -> MigrationSet {
        try MigrationSet(component: name, bundle: .module)
    }

    package static func makeApplication(platform: ServicePlatform, environment: ServiceEnvironment) async throws
        -> ServiceApplication
    {
        var platform = platform
        let settings = try ChatSettings(environment: environment)
        let store = ChatStore(logger: platform.logger)
        let realtime = try await platform.makeRealtimeServer(environment: environment)
        let namespace = realtime.namespace("/chat")
        namespace.requireToken(platform.verifier, roles: [.customer, .rider, .admin])
        namespace.rateLimit = settings.rateLimit
        let workflow = ChatWorkflow(
            database: platform.database, store: store, outbox: platform.outbox,
            emits: realtime.emitter(for: namespace), settings: settings, now: platform.now, logger: platform.logger)
        let handlers = ChatHandlers(
            workflow: workflow, namespace: namespace, settings: settings, instanceId: realtime.instanceId,
            logger: platform.logger
        )
        namespace.on("join", ChatHandlers.JoinRequest.self) { socket, request in
            try await handlers.join(socket, request)
        }
        namespace.on("leave", ChatHandlers.JoinRequest.self) { socket, request in
            try await handlers.leave(socket, request)
        }
        namespace.on("message", ChatHandlers.SendRequest.self) { socket, request in
            try await handlers.send(socket, request)
        }
        namespace.checkRecoveredRooms { user, socketId, rooms in
            await handlers.recoveredRooms(user: user, socketId: socketId, rooms: rooms)
        }
        namespace.onConnect { socket in
            if socket.recovered { await handlers.recheckRooms(of: socket) }
        }
        namespace.forgetPresenceOnDisconnect(workflow.presence, database: platform.database, logger: platform.logger)
        namespace.reportAppState(to: workflow.presence, database: platform.database)

        platform.addConsumer(name: "chat-rooms", topics: [.ordersEvents]) { event, connection in
            try await workflow.project(event, on: connection)
        }
        platform.addStreamConsumer(name: "chat-access", topics: [.chatAccess]) { event in
            try await handlers.handle(event)
        }
        platform.keepFresh(workflow.presence, of: namespace, instanceId: realtime.instanceId)
        let logger = platform.logger
        platform.addPeriodicJob(every: .seconds(3600), failure: "could not purge closed chats") {
            let purged = try await workflow.purgeClosedChats()
            if purged > 0 { logger.info("purged closed chats", metadata: ["chats": "\(purged)"]) }
        }

        let router = platform.makeRouter()
        let api = router.group("v1").add(middleware: platform.authentication)
        ChatRoutes(workflow: workflow, settings: settings).register(on: api)
        return platform.makeApplication(router: router, realtime: realtime)
    }
}

/// Chat's settings.
package struct ChatSettings: Sendable {
    /// `CHAT_RATE_LIMIT_PER_SECOND` (default 5) and `CHAT_RATE_LIMIT_BURST` (default 10): events per socket.
    package var rateLimit: SocketIORateLimit
    /// `CHAT_QUICK_REPLIES_FILE`: the templates, JSON `{"customer":[{id,text}],"rider":[...]}`; built-in ones otherwise.
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

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
            workflow: workflow, settings: settings, instanceId: realtime.instanceId,
            logger: platform.logger
        )
        handlers.register(on: namespace)

        platform.addConsumer(
            name: "chat-rooms", topics: [.ordersEvents], wanted: { workflow.projection(of: $0) != nil }
        ) { event, connection in
            try await workflow.project(event, on: connection)
        }
        let access = ChatAccessConsumer(workflow: workflow, namespace: namespace)
        platform.addStreamConsumer(name: "chat-access", topics: [.chatAccess]) { event in
            try await access.handle(event)
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

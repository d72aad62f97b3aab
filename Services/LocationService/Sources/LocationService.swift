import Contracts
import Foundation
import Hummingbird
import PostgresNIO
import Realtime
import RealtimePlatform
import ServiceKit

/// Live courier location and ETA for deliveries and technician visits (US-072; RDR-016's tracking after pickup).
package enum LocationService: ServiceDefinition {
    package static let name = "location-service"
    package static let defaultPort = 8084
    package static let defaultSchema = "location"

    package static func migrations() throws -> MigrationSet {
        try MigrationSet(component: name, bundle: .module)
    }

    package static func makeApplication(platform: ServicePlatform, environment: ServiceEnvironment) async throws
        -> ServiceApplication
    {
        var platform = platform
        let settings = try LocationSettings(environment: environment)
        let workflow = TrackingWorkflow(
            settings: settings, outbox: platform.outbox, now: platform.now, logger: platform.logger)
        let realtime = try await platform.makeRealtimeServer(environment: environment)
        let tracking = realtime.namespace("/tracking")
        tracking.requireToken(platform.verifier, roles: [.customer, .rider, .technician])
        let eta = EtaCoordinator(
            provider: etaProvider(settings), settings: settings, now: platform.now, logger: platform.logger)
        let background = BackgroundTasks(name: "tracking", logger: platform.logger)
        platform.addService(background)
        let positions = LatestPerKeyPublisher(
            topic: Topic.couriersPositions.rawValue, producer: platform.producer, logger: platform.logger)
        platform.addService(positions)
        let hub = TrackingHub(
            settings: settings, database: platform.database, workflow: workflow, namespace: tracking,
            emits: realtime.emitter(for: tracking), eta: eta, positions: positions, background: background,
            now: platform.now, logger: platform.logger
        )
        tracking.on("track", JobRequest.self) { socket, request in try await hub.watch(socket, jobId: request.jobId) }
        tracking.checkRecoveredRooms { user, _, rooms in await hub.recoveredRooms(user: user, rooms: rooms) }
        tracking.on("untrack", JobRequest.self) { socket, request in
            socket.leave(TrackingHub.room(request.jobId))
            return Untracked(jobId: request.jobId)
        }
        tracking.on("position", CourierPosition.self) { socket, position in
            guard let identity = socket.identity else { throw APIError.unauthorized("not signed in") }
            return try await hub.receive(position, from: identity)
        }

        platform.addConsumerWithFollowUp(name: "location-jobs", topics: [.ordersEvents]) {
            (event: DecodedEvent, connection: PostgresConnection) async throws -> EventConsumer.FollowUp? in
            let changed = try await hub.announce(
                try await workflow.apply(orderEvent: event, on: connection), on: connection)
            if changed.isEmpty { return nil }
            return { @Sendable in await hub.after(changed) }
        }
        platform.addStreamConsumer(name: "location-positions", topics: [.couriersPositions]) { event in
            if let update = event.payload(as: PositionUpdated.self) { hub.learn(update) }
        }
        platform.addPeriodicJob(every: settings.tick, failure: "could not check tracked jobs") { try await hub.tick() }

        let router = platform.makeRouter()
        let api = router.group("v1").add(middleware: platform.authentication)
        LocationRoutes(database: platform.database, workflow: workflow, hub: hub).register(on: api)
        return platform.makeApplication(router: router, realtime: realtime)
    }

    static func etaProvider(_ settings: LocationSettings) -> any EtaProvider {
        switch (settings.provider, settings.providerURL) {
        case (.osrm, let url?):
            return OSRMEtaProvider(baseURL: url, timeout: settings.providerTimeout)
        case (.azure, let url?):
            return AzureMapsEtaProvider(
                baseURL: url, subscriptionKey: settings.azureMapsKey ?? "", timeout: settings.providerTimeout)
        default:
            return EstimatingEtaProvider(roadFactor: settings.roadFactor, defaultSpeedMps: settings.defaultSpeedMps)
        }
    }
}

/// `track` and `untrack`: the job to watch.
struct JobRequest: Codable, Sendable { var jobId: String }

struct Untracked: Codable, Sendable { var jobId: String }

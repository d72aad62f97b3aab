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
        let realtime = try await platform.makeRealtimeServer(environment: environment)
        let workflow = TrackingWorkflow(
            settings: settings, schema: platform.database.schema, instanceId: realtime.instanceId,
            outbox: platform.outbox, now: platform.now, logger: platform.logger)
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
        LocationSocketHandlers(hub: hub).register(on: tracking)

        let jobs = TrackingJobConsumer(workflow: workflow, hub: hub)
        platform.addConsumerWithFollowUp(name: "location-jobs", topics: [.ordersEvents], wanted: jobs.wants) {
            event, connection in
            try await jobs.handle(event, on: connection)
        }
        let learned = CourierPositionConsumer(hub: hub)
        platform.addStreamConsumer(name: "location-positions", topics: [.couriersPositions]) { event in
            learned.handle(event)
        }
        platform.addService(
            TrackedJobsFollower(
                hub: hub, database: platform.database, channel: workflow.jobsChannel, instanceId: workflow.instanceId,
                logger: platform.logger))
        // Every second while jobs are tracked or positions arrive (any instance's: how this one learns of a job
        // another started), else every `TRACKING_IDLE_TICK_MS`.
        platform.addDueJob(
            every: settings.tick, atLeastEvery: settings.idleTick, failure: "could not check tracked jobs"
        ) { try await hub.tick() }

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

import Contracts
import Foundation
import Hummingbird
import LocationService
import PostgresNIO
import Realtime
import RealtimeTesting
import ServiceKit
import ServiceLifecycle
import Synchronization
import TestSupport
import Testing

/// A local HTTP server speaking OSRM's route API (`GET /route/v1/driving/{lng},{lat};{lng},{lat}`): 40 km/h over
/// 1.4 times the straight line; it fails (503) for destinations south of the equator. It records the paths asked.
final class FakeOSRM: Sendable {
    let port = TestPorts.allocate()
    let paths = Mutex<[String]>([])

    func start() async throws {
        let router = Router()
        router.get("route/v1/driving/:coordinates") { request, context -> Response in
            self.paths.withLock { $0.append(request.uri.path) }
            let pairs = try context.parameters.require("coordinates").split(separator: ";").map {
                $0.split(separator: ",").compactMap { Double($0) }
            }
            guard pairs.count == 2, pairs.allSatisfy({ $0.count == 2 }) else {
                return Response(
                    status: .badRequest, body: .init(byteBuffer: ByteBuffer(string: #"{"code":"InvalidQuery"}"#)))
            }
            guard pairs[1][1] >= 0 else { return Response(status: .serviceUnavailable) }
            let meters =
                GeoPoint(lat: pairs[0][1], lng: pairs[0][0]).meters(to: GeoPoint(lat: pairs[1][1], lng: pairs[1][0]))
                * 1.4
            let body =
                #"{"code":"Ok","routes":[{"duration":\#(meters / (40 / 3.6)),"distance":\#(meters),"legs":[]}],"waypoints":[]}"#
            return Response(
                status: .ok, headers: [.contentType: "application/json"],
                body: .init(byteBuffer: ByteBuffer(string: body)))
        }
        let app = Application(router: router, configuration: .init(address: .hostname("127.0.0.1", port: port)))
        let group = ServiceGroup(configuration: .init(services: [app], gracefulShutdownSignals: [], logger: app.logger))
        Task { try await group.run() }
        try await eventually(timeout: .seconds(10), "the fake OSRM listening") { isListening(port: self.port) }
    }
}

/// One location service for a suite, on a broker of its own (its TrackingStarted would otherwise move the order
/// service's sagas in a parallel suite), routing through the fake OSRM.
struct LocationHarness: Sendable {
    let client: ServiceClient
    let schema: String
    let broker: TansuBroker
    let osrm: FakeOSRM
    let settings: [String: String]
    /// The base URL of the service's clock control (a ``SteppedClock``).
    let clockURL: String

    static func start(brokerPort: Int, extra: [String: String]) async throws -> LocationHarness {
        let osrm = FakeOSRM()
        try await osrm.start()
        let broker = TansuBroker(port: brokerPort)
        try await broker.start()
        let schema = uniqueName("location")
        var settings = [
            "ETA_PROVIDER": "osrm", "ETA_PROVIDER_URL": "http://127.0.0.1:\(osrm.port)",
            "ETA_BREAKER_FAILURES": "1000000",
            "TRACKING_STALE_AFTER_SECONDS": "3", "TRACKING_TICK_MS": "200", "POSITION_PUBLISH_INTERVAL_SECONDS": "1",
            // The scenarios' couriers are fast-forwarded (300 m every 0.2 s); 70 m/s would drop them as jumps.
            "POSITION_MAX_SPEED_MPS": "100000",
        ]
        settings.merge(extra) { _, new in new }
        let clock = SteppedClock()
        let clockURL = try await clock.serveControl()
        let client = try await startSuiteService(
            LocationService.self, schema: schema, brokers: broker.address, extra: settings, now: clock.now)
        return LocationHarness(
            client: client, schema: schema, broker: broker, osrm: osrm, settings: settings, clockURL: clockURL)
    }

    private static let shared = SuiteShared { try await LocationHarness.start(brokerPort: 19111, extra: [:]) }

    /// A service whose staleness (30 s) and time limit (120 s) pass only when a test steps its clock (its tests
    /// run one at a time). Positions may be an hour old: the couriers stamp them with the machine's time, which
    /// every step leaves further behind the service's clock.
    private static let stepped = SuiteShared {
        try await LocationHarness.start(
            brokerPort: 19112,
            extra: [
                "TRACKING_STALE_AFTER_SECONDS": "30", "TRACKING_MAX_SECONDS": "120", "POSITION_MAX_AGE_SECONDS": "3600",
                "ETA_REFRESH_SECONDS": "30",
            ])
    }

    static func get() async throws -> LocationHarness { try await shared.get() }

    static func getStepped() async throws -> LocationHarness { try await stepped.get() }

    /// Runs a scenario of location_scenarios.py around a fresh spot with fresh users and jobs.
    func scenario(_ name: String, extra: [String: String] = [:]) async throws
        -> (result: JSONValue, config: [String: String])
    {
        let spot = TestSpot()
        var config = [
            "url": client.baseURL, "brokers": broker.address, "clockUrl": clockURL,
            "staleAfterSeconds": settings["TRACKING_STALE_AFTER_SECONDS"] ?? "",
            "maximumTrackingSeconds": settings["TRACKING_MAX_SECONDS"] ?? "",
            "etaRefreshSeconds": settings["ETA_REFRESH_SECONDS"] ?? "",
            "lat": String(format: "%.6f", spot.lat),
            "lng": String(format: "%.6f", spot.lng),
            "orderId": UUID().uuidString.lowercased(), "requestId": UUID().uuidString.lowercased(),
        ]
        for (name, role) in [
            ("customer", Role.customer), ("stranger", .customer), ("rider", .rider), ("flood", .rider),
            ("technician", .technician),
            ("otherTechnician", .technician),
        ] {
            let userId = uniqueName(name)
            config["\(name)Id"] = userId
            config["\(name)Token"] = try await TestAuth.token(userId, role, name: name.capitalized)
        }
        config.merge(extra) { _, new in new }
        let json = String(decoding: try JSONEncoder().encode(config), as: UTF8.self)
        return (try await runPythonScenario("python/location_scenarios.py", [name, json]), config)
    }
}

func code(_ answer: JSONValue?) -> String? {
    answer?["error"]?["code"]?.stringValue ?? answer?["body"]?["error"]?["code"]?.stringValue
}

@Suite("Location service (US-072, RDR-016 tracking)", .timeLimit(.minutes(3)))
struct LocationServiceTests {
    @Test(
        "a delivery is tracked from pickup to delivery: locations and ETA reach only its customer; no position lands in Postgres"
    )
    func deliveryTracking() async throws {
        let harness = try await LocationHarness.get()
        let (result, config) = try await harness.scenario("delivery")
        #expect(result["before_pickup"]?["state"]?.stringValue == "not_started")
        #expect(result["before_pickup"]?["destination"]?["label"]?.stringValue == "9 Lake View, Koramangala")
        #expect(code(result["stranger"]) == "FORBIDDEN")
        #expect(code(result["rider_track"]) == "FORBIDDEN")
        #expect(code(result["unknown_job"]) == "NOT_FOUND")
        #expect(!(result["live"]?.arrayValue.isEmpty ?? true), "\(result)")
        #expect(
            result["acks"]?.arrayValue.allSatisfy { $0["accepted"] == .bool(true) } == true,
            "\(result["acks"] ?? .null)")
        let sent = result["sent_lats"]?.arrayValue.compactMap(\.doubleValue) ?? []
        let received = result["locations"]?.arrayValue.compactMap { $0["lat"]?.doubleValue } ?? []
        #expect(received == sent, "every position, in order")
        #expect(result["locations"]?[0]?["jobId"]?.stringValue == config["orderId"])
        let eta = try #require(
            result["etas"]?.arrayValue.first(where: { $0["available"] == .bool(true) }), "\(result["etas"] ?? .null)")
        #expect(eta["text"]?.stringValue?.hasPrefix("Arriving in ") == true)
        #expect(eta["spokenText"]?.stringValue?.hasPrefix("Your rider is currently ") == true)
        #expect((eta["seconds"]?.doubleValue ?? 0) > 0)
        #expect(eta["arrivalAt"]?.stringValue != nil)
        // The route starts at the rider (lng,lat first, as OSRM wants) and ends at the destination.
        let lng = Double(config["lng"]!)!
        let starts = harness.osrm.paths.withLock { $0 }.compactMap { path -> Double? in
            path.split(separator: "/").last?.split(separator: ",").first.flatMap { Double($0) }
        }
        #expect(starts.contains { abs($0 - lng) < 1e-9 }, "\(starts.prefix(3)) does not start at \(lng)")
        #expect(result["rejoin"]?["state"]?.stringValue == "live")
        #expect(result["rejoin"]?["lastLocation"]?["lat"]?.doubleValue == sent.last)
        #expect(result["rejoin"]?["eta"]?["available"] == .bool(true))
        #expect(result["rest_view"]?["body"]?["state"]?.stringValue == "live")
        #expect(result["ended"]?[0]?["message"]?.stringValue == "Your order has been delivered.")
        #expect(result["locations_after_end"]?.doubleValue == 0)
        #expect(
            result["events"]
                == .array([
                    .array([.string("TrackingStarted"), .null, .string("delivery")]),
                    .array([.string("TrackingStopped"), .string("delivered"), .string("delivery")]),
                ])
        )
        // Positions are never stored: no row of any logged table of the schema holds a sent coordinate. A job's
        // latest `location` for its watchers is the realtime store's latest value, in an unlogged table it trims
        // after minutes (lost with a crash, never written to the WAL).
        let (rowsWithPositions, latestPersistence, closedKeys) = try await withTestDatabase(
            schema: harness.schema, migrations: []
        ) { database in
            var found = 0
            let tables = try await database.withConnection { connection in
                var names: [String] = []
                let rows = try await connection.query(
                    """
                    SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
                    WHERE n.nspname = \(harness.schema) AND c.relkind = 'r' AND c.relpersistence = 'p'
                    """,
                    logger: database.logger
                )
                for try await name in rows.decode(String.self) { names.append(name) }
                return names
            }
            for table in tables {
                for lat in sent.dropFirst() {
                    let pattern =
                        "%\(String(format: "%.6f", lat).trimmingCharacters(in: CharacterSet(charactersIn: "0")))%"
                    let count = try await database.scalar(
                        PostgresQuery(
                            unsafeSQL:
                                "SELECT count(*) FROM \"\(harness.schema)\".\"\(table)\" t WHERE t::text LIKE $1",
                            binds: {
                                var binds = PostgresBindings()
                                binds.append(pattern)
                                return binds
                            }()), as: Int.self
                    )
                    found += count ?? 0
                }
            }
            let persistence = try await database.scalar(
                """
                SELECT relpersistence::text FROM pg_class
                WHERE relname = 'realtime_latest' AND relnamespace = \(harness.schema)::regnamespace
                """, as: String.self)
            // Ended: the job's room takes no `location` or `eta` from any instance (one a tick behind included).
            let room = "job:\(config["orderId"] ?? "")"
            let closed = try await database.scalar(
                "SELECT string_agg(key, ',' ORDER BY key) FROM realtime_latest WHERE room = \(room) AND closed",
                as: String.self)
            return (found, persistence, closed)
        }
        #expect(rowsWithPositions == 0)
        #expect(latestPersistence == "u")
        #expect(closedKeys == "eta,location")
    }

    @Test("when the routing service fails the ETA is unavailable and locations keep flowing")
    func etaUnavailable() async throws {
        let harness = try await LocationHarness.get()
        let (result, _) = try await harness.scenario("eta_failure")
        #expect(result["locations"]?.arrayValue.count == 3)
        let eta = result["etas"]?[0]
        #expect(eta?["available"] == .bool(false))
        #expect(eta?["text"]?.stringValue == "ETA unavailable")
    }

    @Test(
        "invalid coordinates, times and payloads are refused with codes; older positions dropped; rate limited per courier"
    )
    func positionValidation() async throws {
        let harness = try await LocationHarness.get()
        let (result, _) = try await harness.scenario("validation")
        for key in ["out_of_range", "bad_heading", "future", "too_old", "missing_field"] {
            #expect(code(result[key]) == "VALIDATION_FAILED", "\(key): \(result[key] ?? .null)")
        }
        #expect(result["newest"]?["accepted"] == .bool(true))
        #expect(result["older"]?["accepted"] == .bool(false))
        #expect(result["older"]?["reason"]?.stringValue == "older_than_last")
        #expect(code(result["customer_sends"]) == "FORBIDDEN")
        #expect(result["batch_all_older"]?["body"]?["dropped"]?.doubleValue == 3)
        #expect(result["batch_fresh"]?["body"]?["accepted"]?.doubleValue == 2)
        #expect(code(result["batch_empty"]) == "VALIDATION_FAILED")
        #expect(code(result["batch_too_big"]) == "VALIDATION_FAILED")
        #expect(result["batch_customer"]?["status"]?.doubleValue == 403)
        #expect(result["flood_codes"] == .array([.string("RATE_LIMITED"), .string("ok")]))
    }

    @Test("bad ids, roles and bodies on the REST routes get their 4xx and code")
    func badRequests() async throws {
        let client = try await LocationHarness.get().client
        let technician = try await TestAuth.token(uniqueName("technician"), .technician)
        let customer = try await TestAuth.token(uniqueName("customer"), .customer)
        #expect(try await client.get("/v1/tracking/x").status == 401)
        #expect(try await client.get("/v1/tracking/\(UUID())", token: customer).errorCode == "NOT_FOUND")
        #expect(
            try await client.post("/v1/tracking/\(UUID())/travel-mode", token: technician, raw: #"{"active":true}"#)
                .errorCode == "NOT_FOUND")
        #expect(
            try await client.post("/v1/tracking/\(UUID())/travel-mode", token: technician, raw: #"{"active":"yes"}"#)
                .status == 400)
        #expect(
            try await client.post("/v1/tracking/\(UUID())/travel-mode", token: customer, raw: #"{"active":true}"#)
                .status == 403)
        #expect(try await client.post("/v1/couriers/me/positions", token: technician, raw: "[").status == 400)
    }

    @Test("a job turned live on one instance gets the positions another instance takes at once, not at its next tick")
    func jobStartedOnAnotherInstance() async throws {
        let shared = try await LocationHarness.get()
        let schema = uniqueName("location")
        var settings = shared.settings
        // Neither instance reloads its tracked jobs by itself during the test: only the change's notice can tell
        // the second one.
        settings["TRACKING_TICK_MS"] = "60000"
        settings["TRACKING_IDLE_TICK_MS"] = "600000"
        let first = try await startSuiteService(
            LocationService.self, schema: schema, brokers: shared.broker.address, extra: settings)
        let second = try await startSuiteService(
            LocationService.self, schema: schema, brokers: shared.broker.address, extra: settings)
        let pair = LocationHarness(
            client: first, schema: schema, broker: shared.broker, osrm: shared.osrm, settings: settings,
            clockURL: shared.clockURL)
        let (result, _) = try await pair.scenario("another_instance", extra: ["otherUrl": second.baseURL])
        #expect(result["travel_mode_on"]?["body"]?["state"]?.stringValue == "live", "\(result)")
        #expect(result["position"]?["accepted"] == .bool(true), "\(result)")
        let shown = result["location"]?.arrayValue ?? []
        #expect(!shown.isEmpty && shown.allSatisfy { $0 == .bool(true) }, "no position reached the watcher: \(result)")
    }
}

@Suite("Location deadlines on a stepped clock", .serialized, .timeLimit(.minutes(3)))
struct LocationSteppedDeadlineTests {
    @Test("a technician visit: waiting for travel mode, live, stale and live again, travel mode off and on, arrived")
    func serviceRequestTracking() async throws {
        let harness = try await LocationHarness.getStepped()
        let (result, _) = try await harness.scenario("service")
        #expect(result["assigned"]?["state"]?.stringValue == "not_started")
        #expect(
            result["waiting"]?[0]?["message"]?.stringValue
                == "Technician is on the way. Live location will be available once the technician enables it."
        )
        #expect(result["other_travel_mode"]?["status"]?.doubleValue == 403)
        #expect(result["customer_travel_mode"]?["status"]?.doubleValue == 403)
        #expect(result["travel_mode_on"]?["body"]?["state"]?.stringValue == "live")
        #expect(result["first_location"]?.arrayValue.count == 1)
        #expect(result["first_eta"]?[0]?["spokenText"]?.stringValue?.hasPrefix("Technician is currently") == true)
        #expect(result["stale_early"]?.arrayValue.isEmpty == true, "stale before the limit passed")
        let stale = try #require(result["stale"]?[0], "\(result)")
        #expect(stale["message"]?.stringValue == "ETA recalculating")
        #expect(stale["lastUpdatedAt"]?.stringValue != nil)
        #expect(result["stale_eta"]?[0]?["text"]?.stringValue == "ETA recalculating")
        #expect(result["states_after_resume"]?.arrayValue.last?.stringValue == "live")
        #expect(
            result["ended_travel_mode"]?[0]?["message"]?.stringValue
                == "The technician has stopped sharing their location.")
        #expect(result["travel_mode_on_again"]?["body"]?["state"]?.stringValue == "live")
        #expect(result["arrived"]?["state"]?.stringValue == "ended")
        #expect(result["arrived"]?["message"]?.stringValue == "The technician has arrived.")
        // Every change counts the job's version up, in the view, the events and the REST answers alike.
        let versions = [
            result["assigned"]?["version"], result["waiting"]?[0]?["version"],
            result["travel_mode_on"]?["body"]?["version"],
            result["stale"]?[0]?["version"], result["arrived"]?["version"],
        ].map { $0?.doubleValue ?? -1 }
        #expect(versions.first ?? -1 >= 0 && zip(versions, versions.dropFirst()).allSatisfy { $0 < $1 }, "\(versions)")
        let events = result["events"]?.arrayValue.compactMap { $0[0]?.stringValue } ?? []
        #expect(
            events == ["TrackingStarted", "TrackingStopped", "TrackingStarted", "TrackingStopped"],
            "\(result["events"] ?? .null)")
        let reasons = result["events"]?.arrayValue.compactMap { $0[1]?.stringValue }
        #expect(reasons == ["travel_mode_off", "arrived"])
    }

    @Test(
        "a live ETA is recomputed every ETA_REFRESH_SECONDS while the technician stands still, not before (US-072 AC-002)"
    )
    func etaRefresh() async throws {
        let harness = try await LocationHarness.getStepped()
        let (result, _) = try await harness.scenario("eta_refresh")
        #expect(result["first"]?.doubleValue == 1, "\(result)")
        #expect(result["before_due"]?.doubleValue == 1, "recomputed before it was due: \(result)")
        #expect(result["when_due"]?.doubleValue == 2, "not recomputed when due: \(result)")
        #expect(result["states"]?.arrayValue.last?.stringValue == "live")
        #expect(result["states"]?.arrayValue.contains { $0.stringValue == "stale" } == false)
    }

    @Test(
        "travel mode switches itself off after the limit (configurable): tracking ends and the technician gets a push")
    func timeLimit() async throws {
        let harness = try await LocationHarness.getStepped()
        let (result, _) = try await harness.scenario("time_limit")
        #expect(result["travel_mode_on"]?["body"]?["state"]?.stringValue == "live", "\(result)")
        #expect(result["ended_early"]?.arrayValue.isEmpty == true, "ended before the limit passed")
        #expect(result["ended"]?[0]?["message"]?.stringValue == "Live location sharing ended after the time limit.")
        let reasons = result["events"]?.arrayValue.compactMap { $0[1]?.stringValue }
        #expect(reasons == ["time_limit"])
        #expect(result["push"]?["kind"]?.stringValue == "travel_mode_off")
        #expect(result["push"]?["title"]?.stringValue == "Travel mode switched off")
        #expect(
            result["push"]?["body"]?.stringValue?.hasPrefix("Travel mode was on for 2 minutes, so it was switched off.")
                == true)
    }
}

import ArgumentParser
import AsyncHTTPClient
import Contracts
import Foundation
import Kafka
import LoadKit
import Logging
import NIOCore
import NIOHTTP1
import ServiceKit
import Synchronization

/// Measures `POST /v1/orders/{id}/pickup` under concurrent load: prepares orders that are ready, assigned (by
/// publishing Allocation's OfferAccepted) and arrived, then picks them all up from `concurrency` connections.
@main
struct OrderPickupLoad: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "order-pickup-load", abstract: "Pickup endpoint load test.")

    @Option(help: "The order service.") var url = "http://127.0.0.1:8081"
    @Option(help: "Kafka bootstrap servers (to publish accepted offers as Allocation would).") var kafka =
        "127.0.0.1:29092"
    @Option(help: "Orders to prepare and pick up.") var orders = 3000
    @Option(help: "Concurrent connections (closed loop: each sends its next pickup when the last one answered).")
    var concurrency = 32
    @Option(help: "Pickups a second, started on schedule whatever the answers (open loop); closed loop if absent.")
    var rate: Double?
    @Option(help: "Other pushes' outcomes to publish first, timing how fast the pickup saga's consumer gets past them.")
    var pushOutcomes = 0
    @Option(help: "The order service's process id, to report its resident memory.") var servicePid: Int32?
    @Flag(help: "Send each pickup with an Idempotency-Key of its own, as apps retrying safely do.")
    var idempotencyKeys = false
    @Option(help: "The dev key pair that signs tokens the service accepts.") var keyDir = ".local/dev-keys"
    @Option(help: "Token issuer (the service's JWT_ISSUER).") var issuer = "https://auth.delivery.local"
    @Option(help: "Token audience (the service's JWT_AUDIENCE).") var audience = "delivery-platform"

    func validate() throws {
        if let rate, !(rate > 0) { throw ValidationError("--rate must be more than 0") }
        if concurrency < 1 { throw ValidationError("--concurrency must be at least 1") }
        if !(0...100_000).contains(pushOutcomes) || !(1...100_000).contains(orders) {
            throw ValidationError("--orders and --push-outcomes go up to 100,000 (the producer's queue)")
        }
    }

    func run() async throws {
        LoadOutput.lineBuffered()
        let tokens = try TokenIssuer.loadOrCreate(
            directory: URL(fileURLWithPath: keyDir), issuer: issuer, audience: audience)
        let suffix = UUID().uuidString.prefix(8).lowercased()
        let vendorId = "bench-vendor-\(suffix)"
        let riderId = "bench-rider-\(suffix)"
        let admin = try await tokens.token(userId: "bench-admin", role: .admin)
        let vendor = try await tokens.token(userId: vendorId, role: .vendor)
        let customer = try await tokens.token(userId: "bench-customer-\(suffix)", role: .customer)
        let rider = try await tokens.token(userId: riderId, role: .rider, name: "Bench Rider")
        var clientConfiguration = HTTPClient.Configuration()
        clientConfiguration.connectionPool = .init(
            idleTimeout: .seconds(60), concurrentHTTP1ConnectionsPerHostSoftLimit: concurrency)
        let http = HTTPClient(eventLoopGroupProvider: .singleton, configuration: clientConfiguration)

        @Sendable func call(
            _ method: HTTPMethod, _ path: String, _ token: String, _ body: String? = nil, key: String? = nil
        ) async throws -> (Int, Data) {
            var request = HTTPClientRequest(url: url + path)
            request.method = method
            request.headers.add(name: "Authorization", value: "Bearer \(token)")
            if let key { request.headers.add(name: "Idempotency-Key", value: key) }
            if let body {
                request.headers.add(name: "Content-Type", value: "application/json")
                request.body = .bytes(ByteBuffer(string: body))
            }
            let response = try await http.execute(request, timeout: .seconds(30))
            return (Int(response.status.code), Data(buffer: try await response.body.collect(upTo: 1 << 20)))
        }
        @Sendable func post(_ path: String, _ token: String, _ body: String? = nil, key: String? = nil) async throws
            -> (Int, Data)
        { try await call(.POST, path, token, body, key: key) }

        _ = try await post(
            "/v1/vendors", admin,
            #"{"id":"\#(vendorId)","name":"Bench Kitchen","address":{"line1":"1 Bench St","area":"Indiranagar","lat":12.97,"lng":77.64}}"#
        )
        @Sendable func consumed(_ consumer: String) async throws -> Int {
            let (status, body) = try await call(.GET, "/metrics", admin)
            guard status == 200 else { throw ValidationError("reading the metrics failed: \(status)") }
            return Self.consumed(by: consumer, in: String(decoding: body, as: UTF8.self))
        }
        if pushOutcomes > 0 { try await skipPushOutcomes(consumed: consumed) }
        print("preparing \(orders) ready, assigned and arrived orders…")
        let ids = try await withThrowingTaskGroup(of: String.self) { group in
            var ids: [String] = []
            var started = 0
            func add() {
                group.addTask {
                    let (status, body) = try await post(
                        "/v1/orders", customer,
                        #"{"vendorId":"\#(vendorId)","deliveryAddress":{"line1":"4 Lake View","area":"Koramangala","lat":12.93,"lng":77.62},"paymentMode":"prepaid","totalAmount":199,"requiresPhotoProof":false}"#
                    )
                    guard status == 201, let id = try JSONSerialization.jsonObject(with: body) as? [String: Any],
                        let orderId = id["id"] as? String
                    else {
                        throw ValidationError("creating an order failed: \(status)")
                    }
                    for step in ["accept", "ready"] {
                        let status = try await post("/v1/orders/\(orderId)/\(step)", vendor).0
                        guard status == 200 else { throw ValidationError("\(step) order \(orderId) failed: \(status)") }
                    }
                    return orderId
                }
            }
            while started < min(concurrency, orders) { add(); started += 1 }
            for try await id in group {
                ids.append(id)
                if started < orders { add(); started += 1 }
            }
            return ids
        }
        try await assign(PersonRef(id: riderId, name: "Bench Rider"), to: ids, consumed: consumed)
        try await withThrowingTaskGroup(of: Void.self) { group in
            let next = LoadCounter()
            for _ in 0..<concurrency {
                group.addTask {
                    while true {
                        let index = next.take()
                        guard index < ids.count else { return }
                        let status = try await post("/v1/orders/\(ids[index])/arrived", rider).0
                        guard status == 200 else {
                            throw ValidationError("marking order \(ids[index]) arrived failed: \(status)")
                        }
                    }
                }
            }
            try await group.waitForAll()
        }

        let latencies = LatencySamples()
        let failures = LoadCounter()
        let clock = ContinuousClock()
        // A pickup that fails, by its status or by an error (a timeout), counts as a failure and is still timed.
        @Sendable func pickUp(_ id: String, timedFrom began: ContinuousClock.Instant) async {
            let key = idempotencyKeys ? UUID().uuidString : nil
            let status = try? await post("/v1/orders/\(id)/pickup", rider, key: key).0
            latencies.add(since: began)
            if status != 200 { failures.increment() }
        }
        let cpuBefore = MachineCPU.snapshot()
        let start = clock.now
        let startBoottime = HostEpisodes.now()
        if let rate {
            // Open loop: each pickup starts at its own time, whether or not earlier ones have answered, and is timed
            // from that time, so a slow answer cannot hold back (and hide) the ones behind it.
            print("picking up \(ids.count) orders at \(rate) a second (open loop, at most \(concurrency) connections)…")
            try await withThrowingTaskGroup(of: Void.self) { group in
                for (index, id) in ids.enumerated() {
                    let due = start + .seconds(Double(index) / rate)
                    try await Task.sleep(until: due, clock: clock)
                    group.addTask { await pickUp(id, timedFrom: due) }
                }
                try await group.waitForAll()
            }
        } else {
            print("picking up \(ids.count) orders over \(concurrency) connections…")
            let next = LoadCounter()
            try await withThrowingTaskGroup(of: Void.self) { group in
                for _ in 0..<concurrency {
                    group.addTask {
                        while true {
                            let index = next.take()
                            guard index < ids.count else { return }
                            await pickUp(ids[index], timedFrom: clock.now)
                        }
                    }
                }
                try await group.waitForAll()
            }
        }
        let total = clock.now - start
        let cpu = MachineCPU.report(since: cpuBefore, over: total)
        try await http.shutdown()
        let seconds = LatencySamples.milliseconds(total) / 1000
        print(
            "pickups: \(latencies.count) in \(String(format: "%.2f", seconds)) s = "
                + "\(String(format: "%.0f", Double(latencies.count) / seconds)) req/s, failures \(failures.value); "
                + "latency \(latencies.summary())")
        if let report = latencies.hostEpisodesReport("pickups", window: startBoottime...(startBoottime + seconds)) {
            print(report)
        }
        print(cpu)
        if let servicePid, let resident = MachineCPU.residentKilobytes(servicePid) {
            print("the order service's resident memory: \(resident / 1024) MiB")
        }
    }

    /// Publishes Allocation's OfferAccepted for every order, as Allocation would, and reports how fast the
    /// service's rider-assignment consumer applied them; marking each order arrived afterwards checks that every
    /// one has its rider.
    private func assign(
        _ rider: PersonRef, to ids: [String], consumed: @Sendable (String) async throws -> Int
    ) async throws {
        let offers = try ids.map { orderId in
            let offer = EventEnvelope(
                aggregateId: orderId, occurredAt: Date(),
                payload: OfferAccepted(offerId: UUID().uuidString, orderId: orderId, rider: rider))
            return KafkaOutgoingMessage(
                topic: Topic.allocationEvents.rawValue, key: orderId, value: try ContractCoding.encode(offer))
        }
        try await time(offers, through: "rider-assignments", as: "rider assignments through the broker", consumed)
    }

    /// Publishes `pushOutcomes` outcomes of chat pushes, which no pickup saga waits for, and reports how fast the
    /// pickup saga's consumer (which reads every push's outcome) got past them.
    private func skipPushOutcomes(consumed: @Sendable (String) async throws -> Int) async throws {
        let outcomes = try (0..<pushOutcomes).map { index in
            let userId = "bench-user-\(index % 1000)"
            let sent = EventEnvelope(
                aggregateId: userId, occurredAt: Date(),
                payload: PushSent(
                    notificationId: UUID().uuidString, userId: userId, kind: .chatMessage,
                    correlationId: UUID().uuidString, deviceCount: 1, sentAt: Date()))
            return KafkaOutgoingMessage(
                topic: Topic.notificationsEvents.rawValue, key: userId, value: try ContractCoding.encode(sent))
        }
        try await time(
            outcomes, through: "pickup-saga", as: "other pushes' outcomes through the pickup saga's consumer", consumed)
    }

    /// Publishes `messages` in one go, waits until `consumer`'s `events_consumed_total` has counted them all, and
    /// prints how fast that went, from the first message sent, as `label`.
    private func time(
        _ messages: [KafkaOutgoingMessage], through consumer: String, as label: String,
        _ consumed: @Sendable (String) async throws -> Int
    ) async throws {
        let before = try await consumed(consumer)
        let producer = try KafkaProducer(
            configuration: KafkaProducerConfiguration(
                client: KafkaClientConfiguration(bootstrapServers: [kafka], clientId: "bench")),
            logger: Logger(label: "bench")
        )
        let clock = ContinuousClock()
        let start = clock.now
        for result in try await producer.send(messages) { _ = try result.get() }
        let published = clock.now - start
        await producer.close()
        try await waitUntil(consumer, hasConsumed: before + messages.count, consumed: consumed)
        let seconds = LatencySamples.milliseconds(clock.now - start) / 1000
        print(
            "\(label): \(messages.count) in \(String(format: "%.2f", seconds)) s = "
                + "\(String(format: "%.0f", Double(messages.count) / seconds)) a second (published in "
                + "\(String(format: "%.2f", LatencySamples.milliseconds(published) / 1000)) s)")
    }

    /// Waits until `consumer`'s `events_consumed_total` reaches `target`; fails after 30 s without progress.
    private func waitUntil(
        _ consumer: String, hasConsumed target: Int, consumed: @Sendable (String) async throws -> Int
    ) async throws {
        let clock = ContinuousClock()
        var progressed = (at: clock.now, count: 0)
        while true {
            let count = try await consumed(consumer)
            if count >= target { return }
            if count > progressed.count { progressed = (clock.now, count) }
            guard clock.now - progressed.at < .seconds(30) else {
                throw ValidationError("\(consumer) made no progress in 30 s: \(count) events of \(target)")
            }
            try await Task.sleep(for: .milliseconds(10))
        }
    }

    /// A consumer's `events_consumed_total` in a Prometheus exposition (0 before its first event).
    static func consumed(by consumer: String, in exposition: String) -> Int {
        let prefix = "events_consumed_total{consumer=\"\(consumer)\"} "
        for line in exposition.split(separator: "\n") where line.hasPrefix(prefix) {
            return Int(Double(line.dropFirst(prefix.count)) ?? 0)
        }
        return 0
    }
}

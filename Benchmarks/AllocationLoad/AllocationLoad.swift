import ArgumentParser
import AsyncHTTPClient
import Contracts
import Foundation
import Kafka
import LoadKit
import Logging
import NIOCore
import ServiceKit
import Synchronization

/// Allocation load: RIDERS riders go online across a city (REST), then ORDERS orders become ready at RATE a second
/// (OrderReadyForPickup on orders.events, as the order service publishes it). Each order's vendor stands next to
/// one rider, whose `/rider` socket is connected; the tool measures, from publishing the event, the offer arriving
/// on that socket and its PushRequested arriving on notifications.requests.
@main
struct AllocationLoad: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "allocation-load", abstract: "Allocation service load test.")

    @Option(help: "The allocation service's HTTP address.") var http = "http://127.0.0.1:8083"
    @Option(help: "Kafka bootstrap servers.") var kafka = "127.0.0.1:29092"
    @Option(help: "Online riders spread over the city.") var riders = 10_000
    @Option(help: "Orders to allocate.") var orders = 500
    @Option(help: "Orders per second.") var rate = 20
    @Option(help: "The dev key pair that signs tokens the service accepts.") var keyDir = ".local/dev-keys"

    /// Bangalore's centre; riders within about 15 km of it.
    static let centre = (lat: 12.97, lng: 77.59)
    static let spread = 0.135

    func run() async throws {
        let logger = Logger(label: "allocation-load")
        let issuer = try TokenIssuer.loadOrCreate(
            directory: URL(fileURLWithPath: keyDir), issuer: "https://auth.delivery.local",
            audience: "delivery-platform"
        )
        let run = UUID().uuidString.prefix(8).lowercased()
        var positions: [(id: String, lat: Double, lng: Double)] = []
        for index in 0..<riders {
            positions.append(
                (
                    "load-rider-\(run)-\(index)", Self.centre.lat + .random(in: -Self.spread...Self.spread),
                    Self.centre.lng + .random(in: -Self.spread...Self.spread)
                )
            )
        }
        var clientConfiguration = HTTPClient.Configuration()
        clientConfiguration.connectionPool = .init(
            idleTimeout: .seconds(60), concurrentHTTP1ConnectionsPerHostSoftLimit: 32)
        let client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: clientConfiguration)
        let seeding = ContinuousClock.now
        let failures = LoadCounter()
        try await withThrowingTaskGroup(of: Void.self) { group in
            for (index, rider) in positions.enumerated() {
                if index >= 32 { try await group.next() }
                let token = try await issuer.token(userId: rider.id, role: .rider, name: "Rider \(index)")
                group.addTask {
                    let status = try await RiderAvailability.goOnline(
                        client: client, allocation: http, token: token, lat: rider.lat, lng: rider.lng)
                    if status != 200 { failures.increment() }
                }
            }
            try await group.waitForAll()
        }
        let seconds = LatencySamples.milliseconds(ContinuousClock.now - seeding) / 1000
        print(
            String(
                format: "%d riders online in %.1f s (%.0f a second), %d refused", riders, seconds,
                Double(riders) / seconds, failures.value))
        try await client.shutdown()

        // The riders that will be offered an order: one per order, chosen at random, their sockets connected.
        let targets = Array(positions.shuffled().prefix(orders))
        let sent = PublishTimes()
        let socketOffers = LatencySamples()
        let pushes = LatencySamples()
        let url = http.replacingOccurrences(of: "http://", with: "ws://") + "/socket.io/?EIO=4&transport=websocket"
        let consumer = try KafkaConsumer(
            configuration: {
                // KAFKA_PROPERTIES as the services read it (Benchmarks/lib.sh sets the fetch wait for the relay).
                var configuration = KafkaConsumerConfiguration(
                    client: KafkaClientConfiguration(
                        bootstrapServers: [kafka], clientId: "allocation-load",
                        additionalProperties: try ServiceEnvironment(ProcessInfo.processInfo.environment)
                            .keyValuePairs("KAFKA_PROPERTIES")),
                    groupId: "allocation-load-\(run)"
                )
                configuration.autoOffsetReset = .latest
                return configuration
            }(),
            topics: [Topic.notificationsRequests.rawValue], logger: logger
        )
        let producer = try KafkaProducer(
            configuration: KafkaProducerConfiguration(
                client: KafkaClientConfiguration(bootstrapServers: [kafka], clientId: "allocation-load")),
            logger: logger
        )
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                for try await message in consumer.messages {
                    guard let push = try? EventCatalog.decode(message.value).payload(as: PushRequested.self),
                        push.kind == "offer",
                        let orderId = push.data["orderId"], let start = sent[orderId]
                    else { continue }
                    pushes.add(since: start)
                }
            }
            let connected = LoadCounter()
            for target in targets {
                let token = try await issuer.token(userId: target.id, role: .rider, name: "Rider")
                group.addTask {
                    await RiderSocket.run(
                        url: url, token: token, sent: sent, offers: socketOffers, connected: connected, logger: logger)
                }
            }
            while connected.value < targets.count { try await Task.sleep(for: .milliseconds(100)) }
            // The push reader's consumer group needs a few seconds to be assigned its partitions.
            try await Task.sleep(for: .seconds(5))
            print("\(targets.count) rider sockets connected; publishing \(orders) ready orders at \(rate) a second…")
            let clock = ContinuousClock()
            var deadline = clock.now
            for (index, target) in targets.enumerated() {
                let orderId = UUID().uuidString.lowercased()
                // The vendor stands about 5 m from its rider, who is therefore the nearest.
                let vendor = VendorRef(
                    id: "load-vendor", name: "Load Kitchen",
                    address: Address(
                        line1: "\(index) Load Street", area: "Indiranagar", lat: target.lat + 0.00005, lng: target.lng)
                )
                let ready = OrderReadyForPickup(
                    orderId: orderId, customerId: "load-customer", vendor: vendor, deliveryArea: "Koramangala",
                    deliveryLocation: GeoPoint(lat: target.lat - 0.02, lng: target.lng), totalAmount: 250
                )
                let value = try ContractCoding.encode(
                    EventEnvelope(aggregateId: orderId, occurredAt: Date(), payload: ready))
                sent[orderId] = .now
                try await producer.send(topic: Topic.ordersEvents.rawValue, key: orderId, value: value)
                deadline = deadline.advanced(by: .nanoseconds(1_000_000_000 / rate))
                try await Task.sleep(until: deadline, clock: clock)
            }
            for _ in 0..<300 where socketOffers.count < orders || pushes.count < orders {
                try await Task.sleep(for: .milliseconds(100))
            }
            print("offer on the rider's socket, from OrderReadyForPickup published: \(socketOffers.summary())")
            print("PushRequested on notifications.requests, from OrderReadyForPickup published: \(pushes.summary())")
            group.cancelAll()
        }
        await consumer.close()
        await producer.close()
    }
}

/// One rider's app on `/rider` over the raw Socket.IO protocol: answers pings, times each offer from its order's
/// publication and confirms receiving it.
enum RiderSocket {
    static func run(
        url: String, token: String, sent: PublishTimes, offers: LatencySamples, connected: LoadCounter,
        logger: Logger
    ) async {
        let socket = await LoadSocket.connect(url: url, namespace: "/rider", auth: LoadSocket.auth(token: token)) {
            socket, text in
            guard text.hasPrefix(#"42/rider,["offer""#), let orderId = LoadSocket.field("orderId", in: text),
                let start = sent[orderId]
            else { return }
            offers.add(since: start)
            if let offerId = LoadSocket.field("offerId", in: text) {
                socket.send(#"42/rider,["received",{"offerId":"\#(offerId)"}]"#)
            }
        }?.socket
        guard let socket else { return logger.warning("a rider socket was refused or failed") }
        connected.increment()
        await socket.ended()
    }
}

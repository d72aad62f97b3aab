import ArgumentParser
import Contracts
import Foundation
import Kafka
import LoadKit
import Logging
import NIOCore
import ServiceKit
import Synchronization

/// Location load: JOBS deliveries picked up (OrderCreated and OrderPickedUp on orders.events, as the order service
/// publishes them), a customer socket watching each (`track`), then a rider socket per job sending a position once a
/// second; after a warm-up, times each position sent during SECONDS from its `recordedAt` to the watcher's
/// `location` event.
@main
struct LocationLoad: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "location-load", abstract: "Location service load test.")

    @Option(
        help:
            "The location service's HTTP addresses, comma-separated: with several, watchers and riders are spread over them so that half the positions cross instances."
    ) var http = "http://127.0.0.1:8084"
    @Option(help: "Kafka bootstrap servers.") var kafka = "127.0.0.1:29092"
    @Option(help: "Tracked deliveries (one rider and one watching customer each).") var jobs = 5000
    @Option(help: "Seconds measured (riders send one position a second throughout).") var seconds = 20
    @Option(help: "The dev key pair that signs tokens the service accepts.") var keyDir = ".local/dev-keys"

    func run() async throws {
        LoadOutput.lineBuffered()
        _ = LoadClock.origin
        let logger = Logger(label: "location-load")
        let issuer = try TokenIssuer.loadOrCreate(
            directory: URL(fileURLWithPath: keyDir), issuer: "https://auth.delivery.local",
            audience: "delivery-platform"
        )
        let run = UUID().uuidString.prefix(8).lowercased()
        let producer = try KafkaProducer(
            configuration: KafkaProducerConfiguration(
                client: KafkaClientConfiguration(bootstrapServers: [kafka], clientId: "location-load")),
            logger: logger
        )
        var parties: [(job: String, customer: String, rider: String, lat: Double, lng: Double)] = []
        for index in 0..<jobs {
            let job = UUID().uuidString.lowercased()
            let (customer, rider) = ("load-c-\(run)-\(index)", "load-r-\(run)-\(index)")
            let (lat, lng) = (12.97 + .random(in: -0.13...0.13), 77.59 + .random(in: -0.13...0.13))
            parties.append((job, customer, rider, lat, lng))
            let destination = Address(line1: "\(index) Load Street", area: "Koramangala", lat: lat - 0.03, lng: lng)
            let vendor = VendorRef(id: "load-vendor", name: "Load Kitchen", address: destination)
            let created = OrderCreated(
                orderId: job, customerId: customer, vendor: vendor, deliveryAddress: destination, paymentMode: .prepaid,
                totalAmount: 100,
                requiresPhotoProof: false
            )
            let pickedUp = OrderPickedUp(
                orderId: job, customerId: customer, vendor: vendor, rider: PersonRef(id: rider, name: "Rider"),
                destination: destination,
                pickedUpAt: Date()
            )
            try await producer.send(
                topic: Topic.ordersEvents.rawValue, key: job,
                value: try ContractCoding.encode(EventEnvelope(aggregateId: job, occurredAt: Date(), payload: created)))
            try await producer.send(
                topic: Topic.ordersEvents.rawValue, key: job,
                value: try ContractCoding.encode(EventEnvelope(aggregateId: job, occurredAt: Date(), payload: pickedUp))
            )
        }
        await producer.close()
        print("published \(jobs) picked-up deliveries; connecting \(jobs) watchers…")
        let urls = http.split(separator: ",").map {
            $0.replacingOccurrences(of: "http://", with: "ws://") + "/socket.io/?EIO=4&transport=websocket"
        }
        let latencies = LatencySamples()
        let watching = LoadCounter()
        let couriersUp = LoadCounter()
        let sent = LoadCounter()
        let measuring = LoadCounter()
        let stop = LoadCounter()
        let pacer = CourierPacer()
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await pacer.run(sent: sent, measuring: measuring, stop: stop) }
            for (index, party) in parties.enumerated() {
                let token = try await issuer.token(userId: party.customer, role: .customer, name: "Customer")
                let url = urls[index % urls.count]
                group.addTask {
                    await TrackingClients.watch(
                        url: url, token: token, jobId: party.job, latencies: latencies, watching: watching,
                        measuring: measuring, stop: stop,
                        logger: logger
                    )
                }
                if index % 250 == 249 { try await Task.sleep(for: .milliseconds(200)) }
            }
            try await waitUntil(seconds: 300) { watching.value >= jobs }
            print("\(watching.value) watchers see their job live; connecting \(jobs) riders…")
            for (index, party) in parties.enumerated() {
                let token = try await issuer.token(userId: party.rider, role: .rider, name: "Rider")
                let url = urls[(index / 2) % urls.count]
                group.addTask {
                    await TrackingClients.courier(
                        url: url, token: token, start: (party.lat, party.lng), slot: index, pacer: pacer,
                        up: couriersUp, logger: logger)
                }
                if index % 250 == 249 { try await Task.sleep(for: .milliseconds(200)) }
            }
            try await waitUntil(seconds: 180) { couriersUp.value >= jobs }
            print(
                "\(couriersUp.value) riders connected, each sending a position a second; \(watching.value + couriersUp.value) sockets held by the service; measuring \(seconds) s after 5 s…"
            )
            try await Task.sleep(for: .seconds(5))
            let measuringBegan = HostEpisodes.now()
            let cpu = MachineCPU.snapshot()
            measuring.increment()
            try await Task.sleep(for: .seconds(seconds))
            measuring.increment()
            let cpuReport = MachineCPU.report(since: cpu, over: .seconds(seconds))
            try await Task.sleep(for: .seconds(2))
            let measured = latencies.count
            print(
                "positions sent \(sent.value), delivered to watchers \(measured) (\(String(format: "%.0f", Double(measured) / Double(seconds))) a second)"
            )
            print("position to watcher: \(latencies.summary())")
            print("while measuring: \(cpuReport)")
            let window = measuringBegan...(measuringBegan + Double(seconds))
            if let report = latencies.hostEpisodesReport("positions", window: window) { print(report) }
            stop.increment()
            group.cancelAll()
        }
    }

    func waitUntil(seconds: Int, _ condition: () -> Bool) async throws {
        for _ in 0..<(seconds * 10) {
            if condition() { return }
            try await Task.sleep(for: .milliseconds(100))
        }
        throw ValidationError("timed out")
    }
}

/// The load generator's clients over the raw Socket.IO protocol on `/tracking`.
enum TrackingClients {
    /// Whether a `track` answer or `tracking_status` says the job is tracked: live, or stale until a position.
    static func isTracked(_ text: String) -> Bool {
        text.contains(#""state":"live""#) || text.contains(#""state":"stale""#)
    }

    /// A customer: tracks the job (until it is live), then times every `location` from its `recordedAt`.
    static func watch(
        url: String, token: String, jobId: String, latencies: LatencySamples, watching: LoadCounter,
        measuring: LoadCounter, stop: LoadCounter, logger: Logger
    ) async {
        let (statuses, tracked) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
        let connected = await LoadSocket.connect(url: url, namespace: "/tracking", auth: LoadSocket.auth(token: token))
        {
            _, text in
            if text.hasPrefix(#"42/tracking,["location""#), let stamp = LoadSocket.field("recordedAt", in: text) {
                // Positions recorded inside the measured window only.
                if let recorded = ISO8601.parse(stamp), measuring.value == 1 {
                    latencies.add(
                        Date().timeIntervalSince(recorded) * 1000,
                        sentAt: recorded.timeIntervalSince(LoadClock.originDate))
                }
            } else if text.hasPrefix(#"42/tracking,["tracking_status""#), isTracked(text) {
                tracked.yield()
            }
        }
        guard let socket = connected?.socket else { return logger.warning("a watcher socket was refused or failed") }
        // Track once the job is known; then it is tracked at once or a `tracking_status` says so. Stale counts: a job
        // with no position for `TRACKING_STALE_AFTER_SECONDS` since its pickup is stale, as the first jobs are by the
        // time the last of 5,000 are published, and only the positions below make it live.
        var attempt = 0
        while stop.value == 0 {
            attempt += 1
            guard
                let answer = await socket.call(#"42/tracking,\#(attempt)["track",{"jobId":"\#(jobId)"}]"#, id: attempt)
            else { return }
            if isTracked(answer) { break }
            if answer.contains(#""error""#) {
                try? await Task.sleep(for: .seconds(2))
                continue
            }
            for await _ in statuses { break }
            break
        }
        watching.increment()
        await socket.ended()
    }

    /// A rider: given to `pacer`, which sends its positions a second apart, until stopped.
    static func courier(
        url: String, token: String, start: (lat: Double, lng: Double), slot: Int, pacer: CourierPacer,
        up: LoadCounter, logger: Logger
    ) async {
        let connected = await LoadSocket.connect(url: url, namespace: "/tracking", auth: LoadSocket.auth(token: token))
        guard let socket = connected?.socket else { return logger.warning("a rider socket was refused or failed") }
        up.increment()
        pacer.add(socket, start: start, slot: slot)
        await socket.ended()
    }
}

/// Paces every rider's positions from one loop: each rider has one of a second's 100 slots of 10 ms and gets a
/// position, a little south of its last, when its slot comes round. (A sleeping task per rider cost the generator
/// most of a core at 5,000 riders.)
final class CourierPacer: Sendable {
    private struct Rider {
        let socket: LoadSocket
        let start: (lat: Double, lng: Double)
        var second = 0
    }

    private static let slots = 100
    private let riders = Mutex<[[Rider]]>(Array(repeating: [], count: CourierPacer.slots))

    /// Gives `socket` a position a second from `start` on, in slot `slot` (modulo 100).
    func add(_ socket: LoadSocket, start: (lat: Double, lng: Double), slot: Int) {
        riders.withLock { $0[slot % Self.slots].append(Rider(socket: socket, start: start)) }
    }

    /// Runs until `stop`, counting in `sent` the positions given while `measuring` is 1.
    func run(sent: LoadCounter, measuring: LoadCounter, stop: LoadCounter) async throws {
        let clock = ContinuousClock()
        var deadline = clock.now
        var tick = 0
        while stop.value == 0 {
            let recordedAt = ISO8601.format(Date())
            // A rider whose socket ended leaves its slot.
            let given = riders.withLock { slots in
                var given = 0
                var ended: [Int] = []
                for index in slots[tick % Self.slots].indices {
                    slots[tick % Self.slots][index].second += 1
                    let rider = slots[tick % Self.slots][index]
                    let lat = rider.start.lat - Double(rider.second) * 0.0001
                    let position =
                        #"{"lat":\#(lat),"lng":\#(rider.start.lng),"accuracyMeters":8,"speedMps":8,"recordedAt":"\#(recordedAt)"}"#
                    guard rider.socket.channel.isActive else {
                        ended.append(index)
                        continue
                    }
                    rider.socket.send(#"42/tracking,\#(rider.second)["position",\#(position)]"#)
                    given += 1
                }
                for index in ended.reversed() { slots[tick % Self.slots].remove(at: index) }
                return given
            }
            if measuring.value == 1 { sent.add(given) }
            tick += 1
            deadline = deadline.advanced(by: .milliseconds(10))
            try await Task.sleep(until: deadline, clock: clock)
        }
    }
}

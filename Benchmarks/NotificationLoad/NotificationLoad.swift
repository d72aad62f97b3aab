import ArgumentParser
import AsyncHTTPClient
import Contracts
import Foundation
import Hummingbird
import Kafka
import LoadKit
import Logging
import NIOCore
import ServiceKit
import Synchronization

/// Notification load: USERS users with an Android device each, then COUNT PushRequested at RATE a second on
/// notifications.requests; this process is also the FCM the service calls (token endpoint and messages:send), and
/// times each push from its request's publication to the provider call.
@main
struct NotificationLoad: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "notification-load", abstract: "Notification service load test.")

    @Option(help: "The notification service's HTTP address.") var http = "http://127.0.0.1:8085"
    @Option(help: "Kafka bootstrap servers.") var kafka = "127.0.0.1:29092"
    @Option(help: "The port this process serves FCM on (the service's FCM_BASE_URL and token_uri).") var fcmPort = 18199
    @Option(help: "Users, one Android device each.") var users = 1000
    @Option(help: "Pushes to request.") var count = 5000
    @Option(help: "Requests per second.") var rate = 500
    @Option(help: "Milliseconds between the batches of requests due.") var tickMs = 10
    @Option(help: "The dev key pair that signs tokens the service accepts.") var keyDir = ".local/dev-keys"

    func run() async throws {
        let logger = Logger(label: "notification-load")
        let published = PublishTimes()
        let latencies = LatencySamples()
        let received = LoadCounter()
        let firstAndLast = Mutex<(Date?, Date?)>((nil, nil))
        let router = Router()
        router.post("token") { _, _ in
            Response(
                status: .ok, headers: [.contentType: "application/json"],
                body: .init(
                    byteBuffer: ByteBuffer(
                        string: #"{"access_token":"load-token","expires_in":3600,"token_type":"Bearer"}"#))
            )
        }
        router.post("v1/projects/:project/messages:send") { request, _ -> Response in
            let body = try await request.body.collect(upTo: 1 << 20)
            let text = String(buffer: body)
            if let id = LoadSocket.field("seq", in: text), let start = published[id] { latencies.add(since: start) }
            received.increment()
            let now = Date()
            firstAndLast.withLock { $0 = ($0.0 ?? now, now) }
            return Response(
                status: .ok, body: .init(byteBuffer: ByteBuffer(string: #"{"name":"projects/load/messages/1"}"#)))
        }
        let fake = Application(
            router: router, configuration: .init(address: .hostname("127.0.0.1", port: fcmPort)), logger: logger)
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await fake.runService() }
            let issuer = try TokenIssuer.loadOrCreate(
                directory: URL(fileURLWithPath: keyDir), issuer: "https://auth.delivery.local",
                audience: "delivery-platform"
            )
            let run = UUID().uuidString.prefix(8).lowercased()
            let userIds = (0..<users).map { "load-u-\(run)-\($0)" }
            try await withThrowingTaskGroup(of: Void.self) { registrations in
                for (index, userId) in userIds.enumerated() {
                    if index >= 32 { try await registrations.next() }
                    let token = try await issuer.token(userId: userId, role: .customer)
                    registrations.addTask {
                        var request = HTTPClientRequest(url: http + "/v1/devices")
                        request.method = .PUT
                        request.headers.add(name: "Authorization", value: "Bearer \(token)")
                        request.headers.add(name: "Content-Type", value: "application/json")
                        request.body = .bytes(
                            ByteBuffer(string: #"{"platform":"android","token":"device-\#(userId)"}"#))
                        let response = try await HTTPClient.shared.execute(request, timeout: .seconds(30))
                        _ = try await response.body.collect(upTo: 1 << 16)
                    }
                }
                try await registrations.waitForAll()
            }
            print("\(users) devices registered; requesting \(count) pushes at \(rate) a second…")
            let producer = try KafkaProducer(
                configuration: KafkaProducerConfiguration(
                    client: KafkaClientConfiguration(bootstrapServers: [kafka], clientId: "notification-load")),
                logger: logger
            )
            // One untimed push first through the whole path (the producer's first delivery, the service's consumer
            // assigned its partitions, the provider's token), so the run measures the steady state.
            let warmUp = PushRequested(
                notificationId: "load-\(run)-warm-up", userId: userIds[0], kind: "load", title: "Load", body: "Warm-up",
                data: [:], priority: .high)
            try await producer.send(
                topic: Topic.notificationsRequests.rawValue, key: userIds[0],
                value: try ContractCoding.encode(
                    EventEnvelope(aggregateId: userIds[0], occurredAt: Date(), payload: warmUp)))
            for _ in 0..<300 where received.value == 0 { try await Task.sleep(for: .milliseconds(100)) }
            guard received.value == 1 else {
                throw ValidationError("the warm-up push did not reach the provider in 30 s")
            }
            firstAndLast.withLock { $0 = (nil, nil) }
            // Encoded before the clock starts, so the window measures the service, not the encoding.
            let requests = try (0..<count).map { index -> KafkaOutgoingMessage in
                let userId = userIds[index % userIds.count]
                let id = "load-\(run)-\(index)"
                let push = PushRequested(
                    notificationId: id, userId: userId, kind: "load", title: "Load", body: "Push \(index)",
                    data: ["seq": id], priority: .high, ttlSeconds: 60)
                return KafkaOutgoingMessage(
                    topic: Topic.notificationsRequests.rawValue, key: userId,
                    value: try ContractCoding.encode(
                        EventEnvelope(aggregateId: userId, occurredAt: Date(), payload: push)))
            }
            // Open loop, paced to RATE: every TICK_MS (10) the requests due by then go to the producer as one batch (up to
            // 64 batches awaiting their acknowledgements). Each is timed from when it was due, not when it left,
            // so a generator that falls behind shows as latency.
            let clock = ContinuousClock()
            let cpu = MachineCPU.snapshot()
            let started = clock.now
            let startedBoottime = HostEpisodes.now()
            try await withThrowingTaskGroup(of: Void.self) { sends in
                var sent = 0
                var inFlight = 0
                while sent < count {
                    let due = min(
                        count, Int(LatencySamples.milliseconds(clock.now - started) * Double(rate) / 1000) + 1)
                    if due > sent {
                        for index in sent..<due {
                            published["load-\(run)-\(index)"] = started.advanced(
                                by: .nanoseconds(Int64(index) * 1_000_000_000 / Int64(rate)))
                        }
                        if inFlight >= 64 {
                            try await sends.next()
                            inFlight -= 1
                        }
                        let batch = Array(requests[sent..<due])
                        sends.addTask { for result in try await producer.send(batch) { _ = try result.get() } }
                        inFlight += 1
                        sent = due
                    }
                    try await Task.sleep(for: .milliseconds(tickMs))
                }
                try await sends.waitForAll()
            }
            let sendingSeconds = LatencySamples.milliseconds(clock.now - started) / 1000
            print(String(format: "requested %d pushes in %.1f s", count, sendingSeconds))
            for _ in 0..<1200 where received.value < count + 1 { try await Task.sleep(for: .milliseconds(100)) }
            let cpuReport = MachineCPU.report(since: cpu, over: clock.now - started)
            let (first, last) = firstAndLast.withLock { $0 }
            let seconds = max(0.001, (last ?? Date()).timeIntervalSince(first ?? Date()))
            print(
                "provider calls \(received.value - 1) of \(count); \(String(format: "%.0f", Double(received.value - 1) / seconds)) pushes a second"
            )
            print("request published to provider call: \(latencies.summary())")
            let sending = startedBoottime...(startedBoottime + sendingSeconds)
            if let report = latencies.hostEpisodesReport("pushes", window: sending) { print(report) }
            print("from the first request to the last provider call: \(cpuReport)")
            await producer.close()
            group.cancelAll()
        }
    }
}

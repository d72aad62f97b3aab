import ArgumentParser
import Contracts
import Foundation
import Kafka
import LoadKit
import Logging
import NIOCore
import ServiceKit
import Synchronization

/// Chat load: ROOMS orders with a customer and a rider each (their lifecycle published on orders.events as the
/// order service would), both connected over the raw Socket.IO protocol; measures join-with-history and
/// client-to-client delivery at a message rate.
@main
struct ChatLoad: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "chat-load", abstract: "Chat service load test.")

    @Option(
        help:
            "The chat service's Socket.IO endpoints, comma-separated: each room's customer on the first, its rider on the last (another instance when two are given)."
    ) var url = "ws://127.0.0.1:8082/socket.io/?EIO=4&transport=websocket"
    @Option(help: "Kafka bootstrap servers.") var kafka = "127.0.0.1:29092"
    @Option(help: "Concurrent rooms (two sockets each).") var rooms = 1000
    @Option(help: "Messages per second.") var rate = 500
    @Option(help: "Seconds of messages.") var seconds = 20
    @Option(help: "The dev key pair that signs tokens the service accepts.") var keyDir = ".local/dev-keys"
    @Flag(help: "Print each second's delivery latencies (by when the messages were sent).") var timeline = false

    func run() async throws {
        LoadOutput.lineBuffered()
        // Set now: otherwise the first message would carry a negative stamp that is never counted as delivered.
        _ = LoadClock.origin
        let logger = Logger(label: "chat-load")
        let issuer = try TokenIssuer.loadOrCreate(
            directory: URL(fileURLWithPath: keyDir), issuer: "https://auth.delivery.local",
            audience: "delivery-platform"
        )
        let producer = try KafkaProducer(
            configuration: KafkaProducerConfiguration(
                client: KafkaClientConfiguration(bootstrapServers: [kafka], clientId: "chat-load")),
            logger: logger
        )
        let run = UUID().uuidString.prefix(8).lowercased()
        var parties: [(order: String, customer: String, rider: String)] = []
        for index in 0..<rooms {
            let order = UUID().uuidString.lowercased()
            let (customer, rider) = ("load-c-\(run)-\(index)", "load-r-\(run)-\(index)")
            parties.append((order, customer, rider))
            let address = Address(line1: "4 Lake View", area: "Koramangala", lat: 12.93, lng: 77.62)
            let created = EventEnvelope(
                aggregateId: order,
                occurredAt: Date(),
                payload: OrderCreated(
                    orderId: order, customerId: customer, vendor: VendorRef(id: "v", name: "Bench", address: address),
                    deliveryAddress: address,
                    paymentMode: .cash, totalAmount: 100, requiresPhotoProof: false
                )
            )
            let assigned = EventEnvelope(
                aggregateId: order,
                occurredAt: Date(),
                payload: RiderAssigned(
                    orderId: order, customerId: customer, vendorId: "v", offerId: nil,
                    rider: PersonRef(id: rider, name: "Rider \(index)"))
            )
            try await producer.send(
                topic: Topic.ordersEvents.rawValue, key: order, value: try ContractCoding.encode(created))
            try await producer.send(
                topic: Topic.ordersEvents.rawValue, key: order, value: try ContractCoding.encode(assigned))
        }
        let urls = url.split(separator: ",").map(String.init)
        print("published \(rooms) orders with riders; connecting \(rooms * 2) sockets to \(urls.count) instance(s)…")
        let joins = LatencySamples()
        let deliveries = LatencySamples()
        let acknowledgements = LatencySamples()
        let sockets = SocketDirectory()
        try await withThrowingTaskGroup(of: Void.self) { group in
            var opened = 0
            for party in parties {
                for (user, role) in [(party.customer, Role.customer), (party.rider, Role.rider)] {
                    let token = try await issuer.token(
                        userId: user, role: role, name: role == .customer ? "Customer" : "Rider")
                    let (ready, signal) = AsyncStream.makeStream(of: Void.self)
                    let url = role == .customer ? urls[0] : urls[urls.count - 1]
                    group.addTask {
                        await ChatSocket.run(
                            url: url, token: token, orderId: party.order, user: user, joins: joins,
                            deliveries: deliveries, directory: sockets, ready: signal
                        )
                    }
                    opened += 1
                    if opened % 200 == 0 { for await _ in ready { break } }
                }
            }
            try await eventually(seconds: 120) { sockets.joinedCount >= rooms * 2 }
            print("joined \(sockets.joinedCount) sockets; join with history: \(joins.summary())")
            let senders = sockets.all
            let clock = ContinuousClock()
            var deadline = clock.now
            let streamingBegan = HostEpisodes.now()
            var sent = 0
            for tick in 0..<(seconds * 100) {
                let due = rate * (tick + 1) / 100 - rate * tick / 100
                for _ in 0..<due {
                    senders[Int.random(in: 0..<senders.count)].sendMessage(recorder: acknowledgements)
                    sent += 1
                }
                deadline = deadline.advanced(by: .milliseconds(10))
                try await Task.sleep(until: deadline, clock: clock)
            }
            try await Task.sleep(for: .seconds(2))
            print("messages: sent \(sent), delivered \(deliveries.count); delivery latency \(deliveries.summary())")
            print("the sender's acknowledgement (committed): \(acknowledgements.summary())")
            let sending = streamingBegan...(streamingBegan + Double(seconds))
            if let report = deliveries.hostEpisodesReport("deliveries", window: sending) {
                print(report)
            }
            if timeline {
                print("each second of the load's clock (by when the messages were sent), from \(LoadClock.originDate)")
                for (second, samples) in deliveries.bySecond() { print("  second \(second): \(samples.summary())") }
            }
            // Join with history again, steady state: 50 joins a second from connected sockets.
            let rejoins = LatencySamples()
            for index in 0..<min(500, senders.count) {
                senders[index].sendJoin(recorder: rejoins)
                try await Task.sleep(for: .milliseconds(20))
            }
            try await Task.sleep(for: .seconds(1))
            print("join with history at 50 joins/s: \(rejoins.summary())")
            sockets.closeAll()
            group.cancelAll()
        }
        await producer.close()
    }

    func eventually(seconds: Int, _ condition: () -> Bool) async throws {
        for _ in 0..<(seconds * 10) {
            if condition() { return }
            try await Task.sleep(for: .milliseconds(100))
        }
        throw ValidationError("timed out")
    }
}

/// The joined sockets, to pick senders from.
final class SocketDirectory: Sendable {
    private let sockets = Mutex<[ChatSocketHandle]>([])
    var joinedCount: Int { sockets.withLock { $0.count } }
    var all: [ChatSocketHandle] { sockets.withLock { $0 } }
    func add(_ socket: ChatSocketHandle) { sockets.withLock { $0.append(socket) } }
    func closeAll() { sockets.withLock { $0.forEach { $0.socket.close() } } }
}

/// The acknowledgements a socket waits for, each timed into its recorder when it arrives.
final class PendingAcknowledgements: Sendable {
    private let pending = Mutex<[Int: (ContinuousClock.Instant, LatencySamples)]>([:])

    func expect(_ id: Int, recorder: LatencySamples) { pending.withLock { $0[id] = (.now, recorder) } }

    /// Times `text` if it acknowledges an expected id (`43/chat,<id>[…]`).
    func received(_ text: String) {
        let id = Int(text.dropFirst(8).prefix { $0.isNumber }) ?? -1
        guard let (start, recorder) = pending.withLock({ $0.removeValue(forKey: id) }) else { return }
        recorder.add(since: start)
    }
}

/// A joined socket, to send timed joins and messages on.
final class ChatSocketHandle: Sendable {
    let socket: LoadSocket
    let orderId: String
    private let counter = Atomic<Int>(100)
    private let pendingAcks: PendingAcknowledgements

    init(socket: LoadSocket, orderId: String, pendingAcks: PendingAcknowledgements) {
        self.socket = socket
        self.orderId = orderId
        self.pendingAcks = pendingAcks
    }

    func sendJoin(recorder: LatencySamples) {
        let ack = counter.add(1, ordering: .relaxed).oldValue
        pendingAcks.expect(ack, recorder: recorder)
        socket.send(#"42/chat,\#(ack)["join",{"orderId":"\#(orderId)"}]"#)
    }

    func sendMessage(recorder: LatencySamples) {
        let ack = counter.add(1, ordering: .relaxed).oldValue
        pendingAcks.expect(ack, recorder: recorder)
        let nanoseconds = LoadClock.nanoseconds()
        socket.send(
            #"42/chat,\#(ack)["message",{"orderId":"\#(orderId)","clientMessageId":"\#(UUID().uuidString)","text":"t:\#(nanoseconds)"}]"#
        )
    }
}

/// One client: connect to `/chat`, join (timing the acknowledgement with history), time deliveries and
/// acknowledgements as they arrive, on the socket's event loop.
enum ChatSocket {
    static func run(
        url: String, token: String, orderId: String, user: String, joins: LatencySamples, deliveries: LatencySamples,
        directory: SocketDirectory, ready: AsyncStream<Void>.Continuation
    ) async {
        let pendingAcks = PendingAcknowledgements()
        let connected = await LoadSocket.connect(url: url, namespace: "/chat", auth: LoadSocket.auth(token: token)) {
            _, text in
            if text.hasPrefix("43/chat,") {
                pendingAcks.received(text)
            } else if text.hasPrefix(#"42/chat,["message""#), let range = text.range(of: #""text":"t:"#) {
                let digits = text[range.upperBound...].prefix { $0.isNumber }
                if let stamp = Int64(digits) {
                    deliveries.add(LoadClock.milliseconds(since: stamp), sentAt: Double(stamp) / 1e9)
                }
            }
        }
        ready.yield()
        guard let socket = connected?.socket else { return }
        // Join, retrying while the room is not open yet; time the successful join.
        for attempt in 1..<100 {
            let began = ContinuousClock.now
            guard let answer = await socket.call(#"42/chat,\#(attempt)["join",{"orderId":"\#(orderId)"}]"#, id: attempt)
            else { return }
            if answer.contains(#""ok":true"#) {
                joins.add(since: began)
                directory.add(ChatSocketHandle(socket: socket, orderId: orderId, pendingAcks: pendingAcks))
                break
            }
            try? await Task.sleep(for: .milliseconds(200))
        }
        await socket.ended()
    }
}

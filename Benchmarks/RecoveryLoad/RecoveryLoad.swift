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

/// Connection state recovery under load: ROOMS chat rooms (a customer and a rider socket each) on two chat
/// instances and RIDERS riders' `/rider` sockets on two allocation instances, each dropped DROPS times at random
/// and reconnecting to either instance with its `pid` and last offset, while chat messages (sent by each room's
/// rider from another device, on either instance, that is never dropped) and offers (orders becoming ready next to
/// riders) stream.
/// Counts every event missed, duplicated or out of order per client, the share of reconnects recovered, and the
/// time from a reconnect to its last missed event (the CONNECT answer, which follows the missed emits).
@main
struct RecoveryLoad: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "recovery-load", abstract: "Connection state recovery under load, across instances.")

    @Option(help: "The chat instances' Socket.IO endpoints, comma-separated.") var chat =
        "ws://127.0.0.1:8082/socket.io/?EIO=4&transport=websocket"
    @Option(help: "The allocation instances' HTTP addresses, comma-separated.") var allocation = "http://127.0.0.1:8083"
    @Option(help: "Kafka bootstrap servers.") var kafka = "127.0.0.1:29092"
    @Option(help: "Chat rooms (two clients each).") var rooms = 500
    @Option(help: "Riders (one /rider client each).") var riders = 1000
    @Option(help: "Times each client is dropped.") var drops = 5
    @Option(help: "Seconds of streaming.") var seconds = 60
    @Option(help: "Chat messages per second.") var messageRate = 100
    @Option(help: "Orders ready per second.") var orderRate = 4
    @Option(help: "The dev key pair that signs tokens the services accept.") var keyDir = ".local/dev-keys"
    @Flag(help: "Print each second's reconnect latencies (by when the reconnects began).") var timeline = false

    static let centre = (lat: 12.97, lng: 77.59)

    func run() async throws {
        LoadOutput.lineBuffered()
        let logger = Logger(label: "recovery-load")
        let issuer = try TokenIssuer.loadOrCreate(
            directory: URL(fileURLWithPath: keyDir), issuer: "https://auth.delivery.local",
            audience: "delivery-platform")
        // KAFKA_PROPERTIES as the services read it (Benchmarks/lib.sh sets the fetch wait for the broker's relay).
        let client = KafkaClientConfiguration(
            bootstrapServers: [kafka], clientId: "recovery-load",
            additionalProperties: try ServiceEnvironment(ProcessInfo.processInfo.environment).keyValuePairs(
                "KAFKA_PROPERTIES"))
        let producer = try KafkaProducer(configuration: KafkaProducerConfiguration(client: client), logger: logger)
        let run = UUID().uuidString.prefix(8).lowercased()
        let chatURLs = chat.split(separator: ",").map(String.init)
        let allocationURLs = allocation.split(separator: ",").map(String.init)
        let riderURLs = allocationURLs.map {
            $0.replacingOccurrences(of: "http://", with: "ws://") + "/socket.io/?EIO=4&transport=websocket"
        }

        // Chat rooms open once their order has a rider (orders.events, as the order service publishes them).
        let roomIds = (0..<rooms).map { _ in UUID().uuidString.lowercased() }
        for (index, order) in roomIds.enumerated() {
            let address = Address(line1: "4 Lake View", area: "Koramangala", lat: 12.93, lng: 77.62)
            let created = OrderCreated(
                orderId: order, customerId: "rc-\(run)-\(index)",
                vendor: VendorRef(id: "v", name: "Bench", address: address), deliveryAddress: address,
                paymentMode: .cash, totalAmount: 100, requiresPhotoProof: false)
            let assigned = RiderAssigned(
                orderId: order, customerId: "rc-\(run)-\(index)", vendorId: "v", offerId: nil,
                rider: PersonRef(id: "rr-\(run)-\(index)", name: "Rider \(index)"))
            _ = try await producer.send(
                topic: Topic.ordersEvents.rawValue, key: order,
                value: try ContractCoding.encode(
                    EventEnvelope(aggregateId: order, occurredAt: Date(), payload: created)))
            _ = try await producer.send(
                topic: Topic.ordersEvents.rawValue, key: order,
                value: try ContractCoding.encode(
                    EventEnvelope(aggregateId: order, occurredAt: Date(), payload: assigned)))
        }
        // Riders online across the city, through both allocation instances.
        let riderPositions = (0..<riders).map { index in
            (
                id: "rl-\(run)-\(index)", lat: Self.centre.lat + .random(in: -0.1...0.1),
                lng: Self.centre.lng + .random(in: -0.1...0.1)
            )
        }
        let http = HTTPClient(eventLoopGroupProvider: .singleton)
        for (index, rider) in riderPositions.enumerated() {
            let token = try await issuer.token(userId: rider.id, role: .rider, name: "Rider")
            let status = try await RiderAvailability.goOnline(
                client: http, allocation: allocationURLs[index % allocationURLs.count], token: token, lat: rider.lat,
                lng: rider.lng)
            guard status == 200 else { throw ValidationError("a rider could not go online: \(status)") }
        }
        try await http.shutdown()

        // What each rider was offered, as allocation.events records it.
        let offered = Expected()
        var consumerConfiguration = KafkaConsumerConfiguration(client: client, groupId: "recovery-load-\(run)")
        consumerConfiguration.autoOffsetReset = .earliest
        let consumer = try KafkaConsumer(
            configuration: consumerConfiguration, topics: [Topic.allocationEvents.rawValue], logger: logger)

        let clock = ContinuousClock()
        let streamStart = clock.now + .seconds(20)
        let streamStartBoottime = HostEpisodes.now() + 20
        let streamingBoottime = streamStartBoottime...(streamStartBoottime + Double(seconds))
        let streamEnd = streamStart + .seconds(seconds)
        let stopAt = streamEnd + .seconds(10)
        let stats = RecoveryStats()
        var clients: [LoadClient] = []
        for (index, order) in roomIds.enumerated() {
            for (user, role) in [("rc-\(run)-\(index)", Role.customer), ("rr-\(run)-\(index)", Role.rider)] {
                let token = try await issuer.token(userId: user, role: role, name: "Bench")
                clients.append(LoadClient(kind: .chat(room: order), namespace: "/chat", token: token, urls: chatURLs))
            }
        }
        for rider in riderPositions {
            let token = try await issuer.token(userId: rider.id, role: .rider, name: "Rider")
            clients.append(LoadClient(kind: .rider(id: rider.id), namespace: "/rider", token: token, urls: riderURLs))
        }
        print("\(clients.count) clients connecting; streaming from 20 s for \(seconds) s, \(drops) drops each…")
        let published = Expected()
        var senders: [MessageSender] = []
        for (index, order) in roomIds.enumerated() {
            let token = try await issuer.token(userId: "rr-\(run)-\(index)", role: .rider, name: "Bench")
            senders.append(MessageSender(room: order, token: token, url: chatURLs[index % chatURLs.count]))
        }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for sender in senders {
                group.addTask { await sender.run(published: published) }
            }
            group.addTask {
                for try await message in consumer.messages {
                    guard let sent = try? EventCatalog.decode(message.value).payload(as: OfferSent.self) else {
                        continue
                    }
                    // Offers made in the last seconds, when clients are about to stop, are not counted.
                    if clock.now < stopAt - .seconds(3) { offered.add(sent.offerId, for: sent.riderId) }
                }
            }
            for (index, loadClient) in clients.enumerated() {
                // Each drop at a random moment of the stream; connecting spread over the first 15 s.
                let dropTimes = (0..<drops).map { _ in
                    streamStart + .milliseconds(Int.random(in: 0..<(seconds * 1000)))
                }.sorted()
                let connectAt = clock.now + .milliseconds(index * 15_000 / clients.count)
                group.addTask {
                    try await Task.sleep(until: connectAt, clock: clock)
                    await loadClient.run(dropTimes: dropTimes, stopAt: stopAt, stats: stats)
                }
            }
            try await Task.sleep(until: streamStart, clock: clock)
            print("\(stats.connected.value) clients connected; streaming")
            var sequence: [String: Int] = [:]
            var ordersPublished = 0
            var tick = 0
            var deadline = clock.now
            while clock.now < streamEnd {
                var batch: [KafkaOutgoingMessage] = []
                for _ in 0..<(messageRate * (tick + 1) / 100 - messageRate * tick / 100) {
                    let room = Int.random(in: 0..<rooms)
                    let order = roomIds[room]
                    let number = sequence[order, default: 0]
                    sequence[order] = number + 1
                    senders[room].send(number)
                }
                for _ in 0..<(orderRate * (tick + 1) / 100 - orderRate * tick / 100) {
                    let target = riderPositions.randomElement()!
                    let orderId = UUID().uuidString.lowercased()
                    let vendor = VendorRef(
                        id: "load-vendor", name: "Load Kitchen",
                        address: Address(
                            line1: "1 Load Street", area: "Indiranagar", lat: target.lat + 0.00005, lng: target.lng))
                    let ready = OrderReadyForPickup(
                        orderId: orderId, customerId: "load-customer", vendor: vendor, deliveryArea: "Koramangala",
                        deliveryLocation: GeoPoint(lat: target.lat - 0.02, lng: target.lng), totalAmount: 250)
                    batch.append(
                        KafkaOutgoingMessage(
                            topic: Topic.ordersEvents.rawValue, key: orderId,
                            value: try ContractCoding.encode(
                                EventEnvelope(aggregateId: orderId, occurredAt: Date(), payload: ready))))
                    ordersPublished += 1
                }
                if !batch.isEmpty {
                    let messages = batch
                    group.addTask { for result in try await producer.send(messages) { _ = try result.get() } }
                }
                tick += 1
                deadline = deadline.advanced(by: .milliseconds(10))
                try await Task.sleep(until: deadline, clock: clock)
            }
            print(
                "sent \(sequence.values.reduce(0, +)) chat messages (\(published.count) stored) and \(ordersPublished) ready orders"
            )
            try await Task.sleep(until: stopAt + .seconds(2), clock: clock)
            for sender in senders { sender.stop() }
            group.cancelAll()
        }
        await consumer.close()
        await producer.close()

        var chatTally = Tally()
        var riderTally = Tally()
        for loadClient in clients {
            switch loadClient.kind {
            case .chat(let room): chatTally.add(loadClient.check(expected: published[room]))
            case .rider(let id): riderTally.add(loadClient.check(expected: offered[id]))
            }
        }
        let recovered = stats.recovered.value
        let reconnects = stats.reconnects.value
        print(
            """
            chat messages (\(rooms * 2) clients): \(chatTally)
            offers (\(riders) riders): \(riderTally)
            reconnects \(reconnects), recovered \(recovered) \
            (\(String(format: "%.2f", 100 * Double(recovered) / Double(max(1, reconnects))))%)
            reconnect to last missed event (the CONNECT answer): \(stats.recoveryTimes.summary())
            """)
        if let report = stats.recoveryTimes.hostEpisodesReport("reconnects", origin: 0, window: streamingBoottime) {
            print(report)
        }
        if timeline {
            let start = Date(timeIntervalSinceNow: streamStartBoottime - HostEpisodes.now())
            print("each second from the streaming's start, \(start)")
            for (second, samples) in stats.recoveryTimes.bySecond() {
                print("  second \(second - Int(streamStartBoottime)): \(samples.summary())")
            }
        }
    }
}

/// What was published for each room or rider: message sequence numbers, offer ids.
final class Expected: Sendable {
    private let items = Mutex<[String: [String]]>([:])
    func add(_ item: String, for key: String) { items.withLock { $0[key, default: []].append(item) } }
    subscript(key: String) -> [String] { items.withLock { $0[key] ?? [] } }
    var count: Int { items.withLock { $0.values.reduce(0) { $0 + $1.count } } }
}

/// A room's rider on another device, never dropped, sending the room's numbered messages through the chat service;
/// a message counts as published once the service acknowledged it stored.
final class MessageSender: Sendable {
    let room: String
    let token: String
    let url: String
    /// The socket once connected, and the numbers given before it was.
    private let connection = Mutex<(socket: LoadSocket?, waiting: [Int])>((nil, []))

    init(room: String, token: String, url: String) {
        self.room = room
        self.token = token
        self.url = url
    }

    private func messagePacket(_ number: Int) -> String {
        #"42/chat,\#(number + 1)["message",{"orderId":"\#(room)","clientMessageId":"seq-\#(number)","text":"seq:\#(number)"}]"#
    }

    func send(_ number: Int) {
        let socket = connection.withLock { connection in
            if connection.socket == nil { connection.waiting.append(number) }
            return connection.socket
        }
        socket?.send(messagePacket(number))
    }

    func stop() { connection.withLock { $0.socket }?.close() }

    func run(published: Expected) async {
        let room = room
        let join = #"42/chat,0["join",{"orderId":"\#(room)"}]"#
        let connected = await LoadSocket.connect(url: url, namespace: "/chat", auth: LoadSocket.auth(token: token)) {
            socket, text in
            if text.hasPrefix("43/chat,0[") && !text.contains(#""ok":true"#) {
                // The room is not open yet: join again.
                socket.channel.eventLoop.scheduleTask(in: .milliseconds(200)) { socket.send(join) }
            } else if text.hasPrefix("43/chat,"), text.contains(#""status":"sent""#),
                let id = Int(text.dropFirst(8).prefix { $0.isNumber }), id > 0
            {
                published.add(String(id - 1), for: room)
            }
        }
        guard let socket = connected?.socket else { return }
        socket.send(join)
        let waiting = connection.withLock { connection in
            connection.socket = socket
            defer { connection.waiting = [] }
            return connection.waiting
        }
        for number in waiting { socket.send(messagePacket(number)) }
        await socket.ended()
    }
}

/// Counts over every client.
struct RecoveryStats: Sendable {
    let connected = LoadCounter()
    let reconnects = LoadCounter()
    let recovered = LoadCounter()
    let recoveryTimes = LatencySamples()
}

struct Tally: CustomStringConvertible {
    var expected = 0
    var received = 0
    var missed = 0
    var duplicated = 0
    var outOfOrder = 0
    /// Clients with anything missed, duplicated or out of order, and of those the ones with a reconnect that was not
    /// recovered (which then reload over REST, as apps do).
    var clientsAffected = 0
    var clientsAffectedNotRecovered = 0

    var description: String {
        "expected \(expected), received \(received), missed \(missed), duplicated \(duplicated), "
            + "out of order \(outOfOrder) (clients affected \(clientsAffected), "
            + "\(clientsAffectedNotRecovered) of them after a reconnect not recovered)"
    }

    mutating func add(_ other: Tally) {
        expected += other.expected
        received += other.received
        missed += other.missed
        duplicated += other.duplicated
        outOfOrder += other.outOfOrder
        clientsAffected += other.clientsAffected
        clientsAffectedNotRecovered += other.clientsAffectedNotRecovered
    }
}

/// One app: connects to a random instance, joins its chat room (chat clients) or confirms offers (riders), and at
/// each drop time closes its connection and reconnects after 0.2 to 2 s, to a random instance, with its `pid` and
/// last offset, as socket.io-client does.
final class LoadClient: Sendable {
    enum Kind: Sendable {
        case chat(room: String)
        case rider(id: String)
    }

    let kind: Kind
    let namespace: String
    let token: String
    let urls: [String]

    private struct State {
        var pid: String?
        var offset: String?
        /// What it received, in order: message sequence numbers or offer ids.
        var received: [String] = []
        /// What a `join`'s answer listed (the room's last messages, which an app shows with the live ones).
        var history: Set<String> = []
        var duplicateOffsets = 0
        var backwardOffsets = 0
        var notRecovered = 0
    }

    private let state = Mutex(State())

    init(kind: Kind, namespace: String, token: String, urls: [String]) {
        self.kind = kind
        self.namespace = namespace
        self.token = token
        self.urls = urls
    }

    func run(dropTimes: [ContinuousClock.Instant], stopAt: ContinuousClock.Instant, stats: RecoveryStats) async {
        var drops = dropTimes
        var first = true
        while ContinuousClock.now < stopAt {
            let until = drops.first ?? stopAt
            let (pid, offset) = state.withLock { ($0.pid, $0.offset) }
            var auth = #"{"token":"\#(token)""#
            if let pid { auth += #","pid":"\#(pid)""# + (offset.map { #","offset":"\#($0)""# } ?? "") }
            auth += "}"
            let began = ContinuousClock.now
            let beganBoottime = HostEpisodes.now()
            let connected = await LoadSocket.connect(url: urls.randomElement()!, namespace: namespace, auth: auth) {
                socket, text in self.handle(text, socket: socket)
            }
            if let connected {
                let socket = connected.socket
                let newPid = LoadSocket.field("pid", in: connected.answer)
                let recovered = !first && pid != nil && newPid == pid
                state.withLock { $0.pid = newPid }
                if first {
                    stats.connected.increment()
                } else {
                    stats.reconnects.increment()
                    if recovered {
                        stats.recovered.increment()
                        stats.recoveryTimes.add(
                            LatencySamples.milliseconds(connected.at - began), sentAt: beganBoottime)
                    } else {
                        state.withLock { $0.notRecovered += 1 }
                    }
                }
                if case .chat(let room) = kind, !recovered {
                    socket.send(#"42/chat,1["join",{"orderId":"\#(room)"}]"#)
                }
                let drop = socket.channel.eventLoop.scheduleTask(in: TimeAmount(until - .now)) {
                    socket.close()
                }
                await socket.ended()
                drop.cancel()
            }
            first = false
            if !drops.isEmpty { drops.removeFirst() }
            try? await Task.sleep(for: .milliseconds(Int.random(in: 200...2000)))
        }
    }

    /// Handles one packet, on the socket's event loop.
    private func handle(_ text: String, socket: LoadSocket) {
        // A join acknowledged for a room not open yet: try again.
        if text.hasPrefix("43/chat,1["), !text.contains(#""ok":true"#), case .chat(let room) = kind {
            socket.channel.eventLoop.scheduleTask(in: .milliseconds(200)) {
                socket.send(#"42/chat,1["join",{"orderId":"\#(room)"}]"#)
            }
            return
        }
        if text.hasPrefix("43/chat,1[") {
            var history: [String] = []
            var rest = Substring(text)
            while let range = rest.range(of: #""text":"seq:"#) {
                history.append(String(rest[range.upperBound...].prefix { $0.isNumber }))
                rest = rest[range.upperBound...]
            }
            state.withLock { $0.history.formUnion(history) }
            return
        }
        guard text.hasPrefix("42\(namespace),["), let offset = Self.trailingOffset(text) else { return }
        var item: String?
        switch kind {
        case .chat:
            if text.hasPrefix(#"42/chat,["message""#), let range = text.range(of: #""text":"seq:"#) {
                item = String(text[range.upperBound...].prefix { $0.isNumber })
            }
        case .rider:
            if text.hasPrefix(#"42/rider,["offer""#), let offerId = LoadSocket.field("offerId", in: text) {
                item = offerId
                socket.send(#"42/rider,["received",{"offerId":"\#(offerId)"}]"#)
            }
        }
        state.withLock { state in
            if let last = state.offset {
                if offset == last { state.duplicateOffsets += 1 }
                if Self.goesBack(from: last, to: offset) { state.backwardOffsets += 1 }
            }
            state.offset = offset
            if let item { state.received.append(item) }
        }
    }

    /// Missed, duplicated and out-of-order events against what was published for this client.
    func check(expected: [String]) -> Tally {
        state.withLock { state in
            let received = state.received
            let unique = Set(received)
            var tally = Tally(expected: expected.count, received: received.count)
            tally.missed = Set(expected).subtracting(unique).subtracting(state.history).count
            tally.duplicated = received.count - unique.count + state.duplicateOffsets
            if case .chat = kind {
                let numbers = received.compactMap(Int.init)
                tally.outOfOrder = zip(numbers, numbers.dropFirst()).filter { $0 > $1 }.count
            }
            tally.outOfOrder += state.backwardOffsets
            if tally.missed + tally.duplicated + tally.outOfOrder > 0 {
                tally.clientsAffected = 1
                tally.clientsAffectedNotRecovered = state.notRecovered > 0 ? 1 : 0
            }
            return tally
        }
    }

    /// The offset Socket.IO appends as an event's last argument: `...,"<offset>"]`.
    static func trailingOffset(_ text: String) -> String? {
        guard text.hasSuffix("\"]"), let quote = text.dropLast(2).lastIndex(of: "\"") else { return nil }
        return String(text[text.index(after: quote)..<text.index(text.endIndex, offsetBy: -2)])
    }

    /// Whether offset `next` has the client further back than `last` in any room (same epoch): each offset is the
    /// client's position per room, `<room hash>:<epoch>:<offset>` joined by `~`.
    static func goesBack(from last: String, to next: String) -> Bool {
        func positions(_ text: String) -> [Substring: (epoch: Substring, offset: Int64)] {
            var found: [Substring: (epoch: Substring, offset: Int64)] = [:]
            for entry in text.split(separator: "~") {
                let fields = entry.split(separator: ":")
                guard fields.count == 3, let offset = Int64(fields[2]) else { continue }
                found[fields[0]] = (fields[1], offset)
            }
            return found
        }
        let now = positions(next)
        return positions(last).contains { room, before in
            guard let after = now[room] else { return true }
            return after.epoch == before.epoch && after.offset < before.offset
        }
    }
}

import ChatService
import Contracts
import Foundation
import Kafka
import Realtime
import RealtimeTesting
import ServiceKit
import ServiceLifecycle
import Synchronization
import TestSupport
import Testing

/// The broker of the chat suites whose scenarios wait for the chat-rooms projection. On the broker every suite
/// shares, a chat service projects every order event of every suite, and under the whole run's load it fell 170
/// events (over 20 s) behind the scenarios' own events.
enum ChatSuitesBroker {
    private static let shared = SuiteShared {
        let broker = TansuBroker(port: 19116)
        try await broker.start()
        return broker
    }

    static func get() async throws -> TansuBroker { try await shared.get() }
}

/// CUS-032 against the real chat service, Postgres and broker, with two (and more) python-socketio clients.
@Suite("Chat service (CUS-032)", .timeLimit(.minutes(3)))
struct ChatServiceTests {
    /// One chat service for the suite, on the chat suites' broker.
    struct Harness: Sendable {
        let port: Int
        let broker: TansuBroker
        private static let shared = SuiteShared {
            let broker = try await ChatSuitesBroker.get()
            let service = try await startSuiteService(
                ChatService.self, brokers: broker.address,
                extra: ["CHAT_RATE_LIMIT_PER_SECOND": "1000", "CHAT_RATE_LIMIT_BURST": "1000"])
            return Harness(port: service.port, broker: broker)
        }

        static func get() async throws -> Harness { try await shared.get() }

        /// Runs a scenario of chat_scenarios.py with `config` (plus the service's and broker's addresses).
        func scenario(_ name: String, _ config: [String: String]) async throws -> JSONValue {
            var config = config
            config["url"] = "http://127.0.0.1:\(port)"
            config["http"] = "http://127.0.0.1:\(port)"
            config["brokers"] = broker.address
            let json = String(decoding: try JSONEncoder().encode(config), as: UTF8.self)
            return try await runPythonScenario("python/chat_scenarios.py", [name, json])
        }
    }

    static func code(_ answer: JSONValue?) -> String? { answer?["error"]?["code"]?.stringValue }

    @Test(
        "customer and rider chat both ways, with quick replies, limits, resends; strangers and admins kept out; closing on delivery"
    )
    func conversation() async throws {
        let harness = try await Harness.get()
        let (customerId, riderId) = (uniqueName("customer"), uniqueName("rider"))
        let result = try await harness.scenario(
            "conversation",
            [
                "orderId": UUID().uuidString.lowercased(), "customerId": customerId, "riderId": riderId,
                "customerToken": try await TestAuth.token(customerId, .customer, name: "Asha"),
                "riderToken": try await TestAuth.token(riderId, .rider, name: "Ravi"),
                "strangerToken": try await TestAuth.token(uniqueName("customer"), .customer),
                "adminToken": try await TestAuth.token(uniqueName("admin"), .admin),
            ]
        )
        // AC-005: no chat before a rider is assigned; BR-CHAT-001: only the two parties.
        #expect(Self.code(result["join_before_rider"]) == "CHAT_NOT_AVAILABLE")
        #expect(result["customer_join"]?["ok"] == .bool(true))
        #expect(result["customer_join"]?["readOnly"] == .bool(false))
        #expect(
            result["customer_join"]?["rider"]
                == .object(JSONObject([("id", .string(riderId)), ("name", .string("Ravi"))])))
        #expect(Self.code(result["stranger_join"]) == "FORBIDDEN")
        #expect(result["rider_join"]?["ok"] == .bool(true))
        // AC-002: both ways, in real time.
        #expect(result["hello_ack"]?["status"] == .string("sent"))
        #expect(result["rider_got"]?[0]?["text"] == .string("Hello Ravi"))
        #expect(result["rider_got"]?[0]?["senderName"] == .string("Asha"))
        #expect(result["rider_got"]?[0]?["senderRole"] == .string("customer"))
        #expect(result["customer_got"]?[0]?["text"] == .string("On my way!"))
        // AC-007: quick reply.
        #expect(result["rider_got_quick"]?[1]?["text"] == .string("Please leave it at the door"))
        // Limits.
        #expect(result["exactly_500"]?["status"] == .string("sent"))
        #expect(Self.code(result["too_long"]) == "MESSAGE_TOO_LONG")
        #expect(Self.code(result["empty"]) == "EMPTY_MESSAGE")
        #expect(Self.code(result["one_huge_character"]) == "MESSAGE_TOO_LONG")
        #expect(Self.code(result["nul_character"]) == "INVALID_CHARACTER")
        #expect(Self.code(result["long_client_id"]) == "VALIDATION_FAILED")
        // AC-006: the app's resend returns the first ack and stores nothing new.
        #expect(result["resend_ack"]?["id"] == result["hello_ack"]?["id"])
        guard case .array(let riderMessages) = result["rider_messages"] else {
            throw ScenarioFailed("no rider messages")
        }
        #expect(riderMessages.filter { $0["clientMessageId"] == .string("c-1") }.count == 1)
        #expect(Self.code(result["stranger_send"]) == "FORBIDDEN")
        // Scrolling up: every message exactly once.
        guard case .array(let pages) = result["history"]?["pages"] else { throw ScenarioFailed("no history") }
        let ids = pages.flatMap { page -> [String] in
            guard case .array(let ids) = page else { return [] }
            return ids.compactMap(\.stringValue)
        }
        // Hello, On my way, the quick reply, the 500 characters, and seven updates.
        #expect(ids.count == 11, "\(ids)")
        #expect(Set(ids).count == ids.count)
        #expect(ids == ids.sorted { Int($0)! > Int($1)! })
        // AC-004 / BR-CHAT-002: delivered closes the chat; history stays readable.
        #expect(result["customer_closed"]?[0]?["text"] == .string("This chat is now closed"))
        #expect(result["rider_closed"]?[0]?["orderId"] != nil)
        #expect(Self.code(result["send_after_close"]) == "CHAT_CLOSED")
        #expect(result["history_after_close"]?["texts"]?[0] == .string("This chat is now closed"))
        #expect(result["rejoin_after_close"]?["readOnly"] == .bool(true))
        // BR-CHAT-003: admins read, never write.
        #expect(result["admin_join"]?["readOnly"] == .bool(true))
        #expect(Self.code(result["admin_send"]) == "FORBIDDEN")
        #expect(result["admin_history"]?["status"] == .number("200"))
        #expect(result["stranger_history"]?["status"] == .number("403"))
    }

    @Test("a re-assigned rider loses the room at once; the new one gains it")
    func reassignment() async throws {
        let harness = try await Harness.get()
        let (customerId, riderId, newRiderId) = (uniqueName("customer"), uniqueName("rider"), uniqueName("rider"))
        let result = try await harness.scenario(
            "reassign",
            [
                "orderId": UUID().uuidString.lowercased(), "customerId": customerId, "riderId": riderId,
                "newRiderId": newRiderId,
                "customerToken": try await TestAuth.token(customerId, .customer, name: "Asha"),
                "riderToken": try await TestAuth.token(riderId, .rider, name: "Ravi"),
                "newRiderToken": try await TestAuth.token(newRiderId, .rider, name: "Ria"),
            ]
        )
        #expect(result["old_join"]?["ok"] == .bool(true))
        #expect(result["revoked"]?[0]?["orderId"] != nil)
        #expect(Self.code(result["old_send"]) == "FORBIDDEN")
        #expect(result["new_join"]?["ok"] == .bool(true))
        #expect(result["new_join"]?["rider"]?["id"] == .string(newRiderId))
        #expect(result["new_got"]?[0]?["text"] == .string("Hi Ria"), "\(result)")
        #expect(result["old_got"] == .array([]))
    }

    @Test("a rider joining as fast as the acknowledgements come back while re-assigned away does not stay in the room")
    func reassignmentRace() async throws {
        let harness = try await Harness.get()
        let (customerId, riderId, newRiderId) = (uniqueName("customer"), uniqueName("rider"), uniqueName("rider"))
        let result = try await harness.scenario(
            "reassign_race",
            [
                "tries": "10", "customerId": customerId, "riderId": riderId, "newRiderId": newRiderId,
                "customerToken": try await TestAuth.token(customerId, .customer, name: "Asha"),
                "riderToken": try await TestAuth.token(riderId, .rider, name: "Ravi"),
                "newRiderToken": try await TestAuth.token(newRiderId, .rider, name: "Ria"),
            ]
        )
        let tries = result["tries"]?.arrayValue ?? []
        #expect(tries.count == 10)
        for (index, outcome) in tries.enumerated() {
            #expect(outcome["newGot"] == .array([.string("Hi Ria")]), "try \(index): \(outcome)")
            #expect(outcome["oldGot"] == .array([]), "try \(index): the old rider kept reading: \(outcome)")
            #expect(outcome["recoveringGot"] == .array([]), "try \(index): a recovered socket kept reading: \(outcome)")
            #expect((outcome["recovered"]?.doubleValue ?? 0) > 0, "try \(index): no recovery was tried: \(outcome)")
            #expect(outcome["revoked"] == .number("1"), "try \(index): \(outcome)")
            #expect(Self.code(outcome["lastJoin"]) == "FORBIDDEN", "try \(index): \(outcome)")
            #expect(Self.code(outcome["oldSend"]) == "FORBIDDEN", "try \(index): \(outcome)")
        }
    }

    @Test(
        "a recipient with no socket in the room gets a push with the sender's name, a preview and a deep link; cancelling closes"
    )
    func offlineRecipientPush() async throws {
        let harness = try await Harness.get()
        let (customerId, riderId) = (uniqueName("customer"), uniqueName("rider"))
        let orderId = UUID().uuidString.lowercased()
        let result = try await harness.scenario(
            "offline",
            [
                "orderId": orderId, "customerId": customerId, "riderId": riderId,
                "customerToken": try await TestAuth.token(customerId, .customer, name: "Asha"),
            ]
        )
        #expect(result["ack"]?["status"] == .string("sent"))
        #expect(result["closed"]?[0]?["text"] == .string("This chat is now closed"))
        let events = try await publishedEvents(
            on: .notificationsRequests, key: riderId, brokers: harness.broker.address
        ) { events in
            events.contains { $0.payload is PushRequested }
        }
        let push = events.lazy.compactMap { $0.payload(as: PushRequested.self) }.first
        let request = try #require(push)
        #expect(request.kind == "chat_message")
        #expect(request.title == "Asha")
        #expect(request.body == "Please leave it with the guard at the gate")
        #expect(request.data["link"] == "app://orders/\(orderId)/chat")
        #expect(request.priority == .high)
    }

    @Test("quick replies by role; history needs a party; limits are checked")
    func restRoutes() async throws {
        let harness = try await Harness.get()
        let client = ServiceClient(port: harness.port)
        let customer = try await TestAuth.token(uniqueName("customer"), .customer)
        let replies = try await client.get("/v1/chat/quick-replies?role=rider", token: customer)
        #expect(replies.status == 200)
        #expect(replies.text.contains("I have arrived"))
        #expect(
            try await client.get("/v1/chat/quick-replies", token: customer).text.contains("Please leave it at the door")
        )
        #expect(
            try await client.get("/v1/chat/quick-replies?role=vendor", token: customer).errorCode == "VALIDATION_FAILED"
        )
        #expect(try await client.get("/v1/chat/quick-replies").status == 401)
        #expect(try await client.get("/v1/orders/\(UUID().uuidString)/chat/messages", token: customer).status == 404)
        #expect(
            try await client.get("/v1/orders/x/chat/messages?limit=1000", token: customer).errorCode
                == "VALIDATION_FAILED")
        #expect(
            try await client.get("/v1/orders/x/chat/messages?before=abc", token: customer).errorCode
                == "VALIDATION_FAILED")
    }
}

/// Two chat instances sharing one schema and broker, as deployed behind a load balancer. The broker is theirs
/// alone: another suite's chat service reading the same orders.events would close rooms and announce it on the
/// shared chat.messages at its own pace.
@Suite("Chat across two instances", .timeLimit(.minutes(3)))
struct ChatTwoInstanceTests {
    private static let instances = SuiteShared {
        let broker = TansuBroker(port: 19115)
        try await broker.start()
        let schema = uniqueName("chat")
        let settings = ["CHAT_RATE_LIMIT_PER_SECOND": "500", "CHAT_RATE_LIMIT_BURST": "500"]
        let first = try await startSuiteService(
            ChatService.self, schema: schema, brokers: broker.address, extra: settings)
        let second = try await startSuiteService(
            ChatService.self, schema: schema, brokers: broker.address, extra: settings)
        return Instances(first: first.port, second: second.port, broker: broker)
    }

    /// The two instances' ports, and their broker (which stops when released).
    struct Instances: Sendable {
        let first: Int
        let second: Int
        let broker: TansuBroker
    }

    @Test(
        "1,000 messages sent through both instances reach each of the rider's devices exactly once, across reconnects to either instance"
    )
    func thousandMessages() async throws {
        let instances = try await Self.instances.get()
        let (first, second, brokers) = (instances.first, instances.second, instances.broker.address)
        let (customerId, riderId) = (uniqueName("customer"), uniqueName("rider"))
        let config = [
            "url": "http://127.0.0.1:\(first)", "http": "http://127.0.0.1:\(first)",
            "secondUrl": "http://127.0.0.1:\(second)", "brokers": brokers,
            "orderId": UUID().uuidString.lowercased(), "customerId": customerId, "riderId": riderId,
            "customerToken": try await TestAuth.token(customerId, .customer, name: "Asha"),
            "riderToken": try await TestAuth.token(riderId, .rider, name: "Ravi"),
        ]
        let json = String(decoding: try JSONEncoder().encode(config), as: UTF8.self)
        let result = try await runPythonScenario("python/chat_scenarios.py", ["thousand", json])
        #expect(result["errors"] == .array([]), "\(result["errors"] ?? .null)")
        let acked = Set(result["acked"]?.arrayValue.compactMap(\.stringValue) ?? [])
        #expect(acked.count == 1000)
        let stored = Set(result["history"]?.arrayValue.compactMap(\.stringValue) ?? [])
        #expect(stored == acked, "the history holds every message once")
        for (index, device) in (result["received"]?.arrayValue ?? []).enumerated() {
            let ids = device.arrayValue.compactMap(\.stringValue)
            let doubled = Dictionary(grouping: ids, by: { $0 }).filter { $0.value.count > 1 }.keys
            #expect(doubled.isEmpty, "device \(index) got \(doubled.count) messages twice, e.g. \(doubled.first ?? "")")
            #expect(Set(ids) == acked, "device \(index) missed \(acked.subtracting(ids).count) messages")
        }
    }
}

/// An instance that dies at the worst moment: its message committed, its answer not sent.
@Suite("A chat instance killed right after a message committed", .timeLimit(.minutes(3)))
struct ChatInstanceKilledTests {
    @Test("the other party, on another instance, still gets the message, once")
    func killedAfterCommit() async throws {
        let schema = uniqueName("chat")
        let brokers = try await ChatSuitesBroker.get().address
        let survivor = try await startSuiteService(ChatService.self, schema: schema, brokers: brokers)
        let port = TestPorts.allocate()
        let environment = try testServiceEnvironment(
            schema: schema, brokers: brokers, extra: ["HTTP_PORT": String(port), "CHAT_TEST_KILL_AFTER_SEND": "true"])
        let doomed = try ChildProcess(
            executable: try TestInfrastructure.binPath() + "/chat-service", arguments: [],
            environment: ProcessInfo.processInfo.environment.merging(environment.values) { _, new in new })
        let client = ServiceClient(port: port)
        try await eventually(timeout: .seconds(60), "the second chat instance ready") {
            (try? await client.get("/ready").status) == 200
        }
        let (customerId, riderId) = (uniqueName("customer"), uniqueName("rider"))
        let config = [
            "url": "http://127.0.0.1:\(port)", "secondUrl": "http://127.0.0.1:\(survivor.port)",
            "brokers": brokers, "orderId": UUID().uuidString.lowercased(),
            "customerId": customerId, "riderId": riderId,
            "customerToken": try await TestAuth.token(customerId, .customer, name: "Asha"),
            "riderToken": try await TestAuth.token(riderId, .rider, name: "Ravi"),
        ]
        let json = String(decoding: try JSONEncoder().encode(config), as: UTF8.self)
        let result = try await runPythonScenario("python/chat_scenarios.py", ["killed_after_send", json])
        let status = await doomed.exitStatus()
        #expect(status == 128 + SIGKILL, "the instance was to kill itself after the commit: \(doomed.output)")
        #expect(result["customer_join"]?["ok"] == .bool(true))
        #expect(
            result["rider_got"] == .array([.array([.string("Gate code 1234"), .string("last-words")])]),
            "\(result)")
        #expect(result["stored"] == .array([.string("Gate code 1234")]))
    }
}

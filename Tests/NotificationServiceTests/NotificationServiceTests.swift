import Contracts
import Foundation
import JWTKit
import Kafka
import NotificationService
import PostgresNIO
import Realtime
import RealtimeTesting
import ServiceKit
import TestSupport
import Testing

/// One notification service for the suite, on a broker of its own (its PushFailed for other suites' users would
/// otherwise reach the order service's sagas), with FCM and APNs pointed at the fakes.
struct NotificationHarness: Sendable {
    let client: ServiceClient
    let schema: String
    let broker: TansuBroker
    let fcm: FakeFCM
    let apns: FakeAPNs
    let producer: KafkaProducer
    static let apnsKeyId = "KEY1234567"
    static let apnsTeamId = "TEAM123456"

    private static let shared = SuiteShared { try await NotificationHarness.start() }

    static func get() async throws -> NotificationHarness { try await shared.get() }

    /// Runs openssl with `arguments` in `directory`.
    static func openssl(_ arguments: [String]) async throws {
        let process = try ChildProcess(executable: "/usr/bin/openssl", arguments: arguments)
        let status = await process.exitStatus()
        guard status == 0 else { throw ScenarioFailed("openssl \(arguments.first ?? "") failed: \(process.output)") }
    }

    private static func start() async throws -> NotificationHarness {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(uniqueName("push-keys"))
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let path = { (name: String) in directory.appendingPathComponent(name).path }
        // The FCM service account's RSA key, and the fake APNs server's TLS certificate.
        try await openssl(["genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", path("fcm.pem")])
        try await openssl(["pkey", "-in", path("fcm.pem"), "-pubout", "-out", path("fcm-public.pem")])
        try await openssl([
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", path("tls-key.pem"), "-out",
            path("tls-cert.pem"), "-days", "1",
            "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost",
        ])
        let apnsKey = ES256PrivateKey()
        try Data(apnsKey.pemRepresentation.utf8).write(to: URL(fileURLWithPath: path("apns.p8")))

        let fcm = FakeFCM(publicKeyPEM: try String(contentsOfFile: path("fcm-public.pem"), encoding: .utf8))
        try await fcm.start()
        let apns = FakeAPNs(
            publicKeyPEM: apnsKey.publicKey.pemRepresentation, certificateFile: path("tls-cert.pem"),
            keyFile: path("tls-key.pem"))
        try await apns.start()
        let account: [String: String] = [
            "type": "service_account", "project_id": "test-project",
            "client_email": "push@test-project.iam.gserviceaccount.com",
            "private_key": try String(contentsOfFile: path("fcm.pem"), encoding: .utf8),
            "token_uri": "\(fcm.baseURL)/token",
        ]
        try JSONSerialization.data(withJSONObject: account).write(
            to: URL(fileURLWithPath: path("service-account.json")))

        let broker = TansuBroker(port: 19113)
        try await broker.start()
        let schema = uniqueName("notification")
        let client = try await startSuiteService(
            NotificationService.self, schema: schema, brokers: broker.address,
            extra: [
                "FCM_SERVICE_ACCOUNT_FILE": path("service-account.json"), "FCM_BASE_URL": fcm.baseURL,
                "APNS_KEY_FILE": path("apns.p8"),
                "APNS_KEY_ID": apnsKeyId, "APNS_TEAM_ID": apnsTeamId, "APNS_TOPIC": "com.example.delivery",
                "APNS_BASE_URL": apns.baseURL,
                "APNS_CA_FILE": path("tls-cert.pem"), "PUSH_RETRY_INITIAL_MS": "100", "PUSH_MAX_ATTEMPTS": "3",
                "PUSH_TICK_MS": "50",
                "PUSH_CONCURRENCY": "16",
            ]
        )
        let producer = try KafkaProducer(
            configuration: KafkaProducerConfiguration(
                client: KafkaClientConfiguration(bootstrapServers: [broker.address], clientId: "push-tests")),
            logger: TestInfrastructure.logger("push-tests")
        )
        return NotificationHarness(
            client: client, schema: schema, broker: broker, fcm: fcm, apns: apns, producer: producer)
    }

    /// A user with the given devices registered; returns the user id and token.
    func user(devices: [(platform: String, token: String)]) async throws -> (id: String, token: String) {
        let id = uniqueName("user")
        let token = try await TestAuth.token(id, .customer)
        for device in devices {
            let answer = try await client.request(
                .PUT, "/v1/devices", token: token,
                body: Data(#"{"platform":"\#(device.platform)","token":"\#(device.token)"}"#.utf8)
            )
            try #require(answer.status == 200, "\(answer.text)")
        }
        return (id, token)
    }

    func push(_ request: PushRequested) async throws {
        let envelope = EventEnvelope(aggregateId: request.userId, occurredAt: Date(), payload: request)
        try await producer.send(
            topic: Topic.notificationsRequests.rawValue, key: request.userId, value: try ContractCoding.encode(envelope)
        )
    }

    /// The PushSent or PushFailed of `notificationId`.
    func outcome(of notificationId: String, userId: String) async throws -> DecodedEvent? {
        let events = try await publishedEvents(on: .notificationsEvents, key: userId, brokers: broker.address) {
            events in
            events.contains { Self.notificationId(of: $0) == notificationId }
        }
        return events.first { Self.notificationId(of: $0) == notificationId }
    }

    static func notificationId(of event: DecodedEvent) -> String? {
        event.payload(as: PushSent.self)?.notificationId ?? event.payload(as: PushFailed.self)?.notificationId
    }

    /// Waits until the user's `count` notifications have every delivery sent: PushSent comes with the first device
    /// reached, while the others may still be on their way (or retried) to their provider.
    func waitUntilDelivered(_ userId: String, notifications count: Int) async throws {
        try await eventually(timeout: .seconds(20), "every delivery sent") {
            let notifications = try await log(userId)["notifications"]?.arrayValue ?? []
            return notifications.count == count
                && notifications.allSatisfy { notification in
                    (notification["deliveries"]?.arrayValue ?? []).allSatisfy { $0["status"]?.stringValue == "sent" }
                }
        }
    }

    func log(_ userId: String) async throws -> JSONValue {
        let admin = try await TestAuth.token(uniqueName("admin"), .admin)
        return try JSONValue.parse(try await client.get("/v1/notifications?userId=\(userId)", token: admin).text)
    }
}

func request(_ userId: String, id: String = UUID().uuidString, kind: PushKind = .offer) -> PushRequested {
    PushRequested(
        notificationId: id, userId: userId, kind: kind, title: "New delivery offer",
        body: "New delivery offer! Earn an estimated ₹65.",
        data: ["link": "app://offers/o-1", "offerId": "o-1"], priority: .high, collapseKey: "offer-o-1", ttlSeconds: 60,
        sound: "offer_alert",
        correlationId: "order-1", wakesApp: kind == .offer
    )
}

@Suite("Notification service", .timeLimit(.minutes(3)))
struct NotificationServiceTests {
    @Test(
        "one push reaches an Android and an iOS device with exactly the requests FCM v1 and APNs expect; an offer wakes the app's background handler"
    )
    func exactRequests() async throws {
        let harness = try await NotificationHarness.get()
        let (android, ios) = ("ok-\(UUID())", APNsTestToken.make(APNsTestToken.ok))
        let user = try await harness.user(devices: [("android", android), ("ios", ios)])
        let push = request(user.id)
        try await harness.push(push)
        let outcome = try #require(try await harness.outcome(of: push.notificationId, userId: user.id))
        let sent = try #require(outcome.payload(as: PushSent.self), "\(outcome)")
        #expect(sent.deviceCount == 2)
        #expect(sent.kind == "offer")
        #expect(sent.correlationId == "order-1")
        try await harness.waitUntilDelivered(user.id, notifications: 1)

        let tokenRequest = try #require(harness.fcm.tokenRequests.withLock { $0.first })
        #expect(tokenRequest["iss"] == "push@test-project.iam.gserviceaccount.com")
        #expect(tokenRequest["scope"] == "https://www.googleapis.com/auth/firebase.messaging")
        #expect(tokenRequest["aud"] == "\(harness.fcm.baseURL)/token")
        #expect(tokenRequest["lifetime"] == "3600")
        let fcmRequest = try #require(harness.fcm.log.pushes(to: android).first)
        #expect(fcmRequest.path == "/v1/projects/test-project/messages:send")
        #expect(fcmRequest.headers["authorization"] == "Bearer fake-access-token-1")
        let message = try #require(fcmRequest.json["message"] as? [String: Any])
        #expect(message["token"] as? String == android)
        // An offer wakes the app: data only at high priority on Android (its handler shows it and confirms receipt),
        // and for an iOS app through FCM the alert with content-available, as a direct APNs push carries.
        #expect(message["notification"] == nil)
        #expect(
            message["data"] as? [String: String] == [
                "link": "app://offers/o-1", "offerId": "o-1", "notificationId": push.notificationId,
                "title": "New delivery offer",
                "body": "New delivery offer! Earn an estimated ₹65.", "channel": "offer", "sound": "offer_alert",
            ])
        let androidConfig = try #require(message["android"] as? [String: Any])
        #expect(androidConfig["priority"] as? String == "HIGH")
        #expect(androidConfig["ttl"] as? String == "60s")
        #expect(androidConfig["collapse_key"] as? String == "offer-o-1")
        #expect(androidConfig["notification"] == nil)
        let fcmAPNs = try #require(message["apns"] as? [String: Any], "an iOS app registered through FCM is woken too")
        let fcmAPNsHeaders = try #require(fcmAPNs["headers"] as? [String: String])
        #expect(fcmAPNsHeaders["apns-priority"] == "10" && fcmAPNsHeaders["apns-push-type"] == "alert")
        #expect(fcmAPNsHeaders["apns-collapse-id"] == "offer-o-1" && fcmAPNsHeaders["apns-expiration"] != nil)
        let fcmAPS = try #require((fcmAPNs["payload"] as? [String: Any])?["aps"] as? [String: Any])
        #expect(fcmAPS["content-available"] as? Int == 1)
        #expect(
            fcmAPS["alert"] as? [String: String] == [
                "title": "New delivery offer", "body": "New delivery offer! Earn an estimated ₹65.",
            ])

        let apnsRequest = try #require(harness.apns.log.pushes(to: ios).first)
        #expect(apnsRequest.path == "/3/device/\(ios)")
        #expect(apnsRequest.headers["apns-topic"] == "com.example.delivery")
        #expect(apnsRequest.headers["apns-push-type"] == "alert")
        #expect(apnsRequest.headers["apns-priority"] == "10")
        #expect(apnsRequest.headers["apns-collapse-id"] == "offer-o-1")
        let expiration = Double(apnsRequest.headers["apns-expiration"] ?? "") ?? 0
        #expect(abs(expiration - (Date().timeIntervalSince1970 + 60)) < 30)
        let bearer = try #require(apnsRequest.headers["authorization"]?.split(separator: " ").last)
        let header = try #require(bearer.split(separator: ".").first)
        let headerJSON = try JSONValue.parse(
            String(decoding: Data(base64URLEncoded: String(header)) ?? Data(), as: UTF8.self))
        #expect(headerJSON["alg"]?.stringValue == "ES256")
        #expect(headerJSON["kid"]?.stringValue == NotificationHarness.apnsKeyId)
        let aps = try #require(apnsRequest.json["aps"] as? [String: Any])
        #expect(
            aps["alert"] as? [String: String] == [
                "title": "New delivery offer", "body": "New delivery offer! Earn an estimated ₹65.",
            ])
        #expect(aps["sound"] as? String == "offer_alert.caf")
        #expect(aps["content-available"] as? Int == 1)
        #expect(apnsRequest.json["notificationId"] as? String == push.notificationId)
        #expect(apnsRequest.json["link"] as? String == "app://offers/o-1")

        let log = try await harness.log(user.id)
        #expect(log["notifications"]?[0]?["status"]?.stringValue == "sent")
        #expect(
            log["notifications"]?[0]?["deliveries"]?.arrayValue.map { $0["status"]?.stringValue } == ["sent", "sent"])

        // A chat message is an alert only: nothing runs in the background for it.
        let chat = request(user.id, kind: .chatMessage)
        try await harness.push(chat)
        _ = try #require(try await harness.outcome(of: chat.notificationId, userId: user.id))
        try await harness.waitUntilDelivered(user.id, notifications: 2)
        let chatToFCM = try #require(harness.fcm.log.pushes(to: android).last?.json["message"] as? [String: Any])
        #expect(chatToFCM["apns"] == nil)
        #expect(
            chatToFCM["notification"] as? [String: String] == [
                "title": "New delivery offer", "body": "New delivery offer! Earn an estimated ₹65.",
            ])
        #expect(
            chatToFCM["data"] as? [String: String] == [
                "link": "app://offers/o-1", "offerId": "o-1", "notificationId": chat.notificationId,
            ])
        #expect(
            (chatToFCM["android"] as? [String: Any])?["notification"] as? [String: String] == [
                "channel_id": "chat_message", "sound": "offer_alert",
            ])
        let chatToAPNs = try #require(harness.apns.log.pushes(to: ios).last)
        #expect((chatToAPNs.json["aps"] as? [String: Any])?["content-available"] == nil)
    }

    @Test("503 and 429 are retried (honouring Retry-After) until sent")
    func retries() async throws {
        let harness = try await NotificationHarness.get()
        let (flaky, busy) = ("flaky-\(UUID())", APNsTestToken.make(APNsTestToken.busy))
        let user = try await harness.user(devices: [("android", flaky), ("ios", busy)])
        let push = request(user.id)
        try await harness.push(push)
        try await eventually(timeout: .seconds(30), "both devices sent") {
            let log = try await harness.log(user.id)
            return log["notifications"]?[0]?["deliveries"]?.arrayValue.allSatisfy {
                $0["status"]?.stringValue == "sent"
            } == true
        }
        #expect(harness.fcm.log.pushes(to: flaky).count == 2)
        let busyAttempts = harness.apns.log.pushes(to: busy)
        #expect(busyAttempts.count == 2)
        if busyAttempts.count == 2 {
            #expect(busyAttempts[1].at.timeIntervalSince(busyAttempts[0].at) >= 0.9, "Retry-After: 1 was not honoured")
        }
        let outcome = try await harness.outcome(of: push.notificationId, userId: user.id)
        #expect(outcome?.payload is PushSent)
    }

    @Test("dead tokens (FCM UNREGISTERED, APNs 410 and BadDeviceToken) are removed; all devices dead is PushFailed")
    func deadTokens() async throws {
        let harness = try await NotificationHarness.get()
        let (unregistered, gone, bad) = (
            "unregistered-\(UUID())", APNsTestToken.make(APNsTestToken.gone), APNsTestToken.make(APNsTestToken.bad)
        )
        let user = try await harness.user(devices: [("android", unregistered), ("ios", gone), ("ios", bad)])
        let push = request(user.id)
        try await harness.push(push)
        let outcome = try await harness.outcome(of: push.notificationId, userId: user.id)
        #expect(outcome?.payload(as: PushFailed.self)?.reason == "device token no longer valid")
        let log = try await harness.log(user.id)
        #expect(
            log["notifications"]?[0]?["deliveries"]?.arrayValue.map { $0["status"]?.stringValue } == [
                "token_removed", "token_removed", "token_removed",
            ])
        for token in [unregistered, gone, bad] {
            #expect(
                try await harness.client.request(.DELETE, "/v1/devices/\(token)", token: user.token).status == 404,
                "\(token) still registered")
        }
    }

    @Test("a provider that keeps failing: the last attempt ends in PushFailed and a dead letter")
    func exhausted() async throws {
        let harness = try await NotificationHarness.get()
        let down = "down-\(UUID())"
        let user = try await harness.user(devices: [("android", down)])
        let push = request(user.id)
        try await harness.push(push)
        let outcome = try await harness.outcome(of: push.notificationId, userId: user.id)
        #expect(outcome?.payload(as: PushFailed.self)?.reason == "no success after 3 attempts")
        #expect(harness.fcm.log.pushes(to: down).count == 3)
        let deadLetters = try await withTestDatabase(schema: harness.schema, migrations: []) { database in
            try await database.scalar("SELECT count(*) FROM push_dead_letters WHERE token = \(down)", as: Int.self)
        }
        #expect(deadLetters == 1)
    }

    @Test("the same notification id twice is pushed once; a user without devices is logged as such")
    func duplicatesAndNoDevices() async throws {
        let harness = try await NotificationHarness.get()
        let device = "ok-\(UUID())"
        let user = try await harness.user(devices: [("android", device)])
        let push = request(user.id)
        try await harness.push(push)
        try await harness.push(push)
        _ = try await harness.outcome(of: push.notificationId, userId: user.id)
        let marker = request(user.id)
        try await harness.push(marker)
        _ = try await harness.outcome(of: marker.notificationId, userId: user.id)
        #expect(harness.fcm.log.pushes(to: device).count == 2, "once for the duplicated id, once for the marker")

        let lonely = uniqueName("user")
        let unheard = request(lonely)
        try await harness.push(unheard)
        let outcome = try await harness.outcome(of: unheard.notificationId, userId: lonely)
        #expect(outcome?.payload(as: PushFailed.self)?.reason == "no_devices")
        #expect(try await harness.log(lonely)["notifications"]?[0]?["status"]?.stringValue == "no_devices")
    }

    @Test("a notification or delivery status this build does not know (a newer version's) fails the log read")
    func unknownStatuses() async throws {
        let harness = try await NotificationHarness.get()
        let lonely = uniqueName("user")
        let unheard = request(lonely)
        try await harness.push(unheard)
        _ = try await harness.outcome(of: unheard.notificationId, userId: lonely)
        let user = try await harness.user(devices: [("android", "ok-\(UUID())")])
        let push = request(user.id)
        try await harness.push(push)
        try await harness.waitUntilDelivered(user.id, notifications: 1)
        try await withTestDatabase(schema: harness.schema, migrations: []) { database in
            // What a newer version's migration would allow; other tests' rows keep their statuses.
            for constraint in ["notifications_status_check", "deliveries_status_check"] {
                let table = constraint.replacingOccurrences(of: "_status_check", with: "")
                try await database.client.query(
                    PostgresQuery(unsafeSQL: "ALTER TABLE \(table) DROP CONSTRAINT IF EXISTS \(constraint)"),
                    logger: database.logger)
            }
            try await database.client.query(
                "UPDATE notifications SET status = 'archived' WHERE notification_id = \(unheard.notificationId)",
                logger: database.logger)
            try await database.client.query(
                "UPDATE deliveries SET status = 'bounced' WHERE notification_id = \(push.notificationId)",
                logger: database.logger)
        }
        let admin = try await TestAuth.token(uniqueName("admin"), .admin)
        for userId in [lonely, user.id] {
            let response = try await harness.client.get("/v1/notifications?userId=\(userId)", token: admin)
            #expect(response.status == 500, "\(userId)")
            #expect(response.errorCode == "INTERNAL_ERROR")
        }
    }

    @Test("malformed messages on the topic are logged and skipped; the consumer goes on")
    func malformedRequests() async throws {
        let harness = try await NotificationHarness.get()
        let device = "ok-\(UUID())"
        let user = try await harness.user(devices: [("android", device)])
        let topic = Topic.notificationsRequests.rawValue
        try await harness.producer.send(topic: topic, key: user.id, value: Data("not json at all".utf8))
        let missingFields =
            #"{"eventId":"\#(UUID())","type":"PushRequested","aggregateId":"\#(user.id)","occurredAt":"2026-11-22T10:00:00Z","schemaVersion":1,"payload":{"userId":"\#(user.id)"}}"#
        try await harness.producer.send(topic: topic, key: user.id, value: Data(missingFields.utf8))
        let push = request(user.id)
        try await harness.push(push)
        let outcome = try await harness.outcome(of: push.notificationId, userId: user.id)
        #expect(outcome?.payload is PushSent)
    }

    @Test(
        "ten slow provider calls do not hold up other users' pushes (more than an HTTP/1.1 client's default 8 connections)"
    )
    func slowCallsDoNotBlock() async throws {
        let harness = try await NotificationHarness.get()
        let slowTokens = (0..<10).map { _ in "slow-\(UUID())" }
        let quickToken = "ok-\(UUID())"
        var slowPushes: [(push: PushRequested, userId: String)] = []
        for token in slowTokens {
            let user = try await harness.user(devices: [("android", token)])
            slowPushes.append((request(user.id), user.id))
        }
        let quick = try await harness.user(devices: [("android", quickToken)])
        for (push, _) in slowPushes { try await harness.push(push) }
        try await eventually(timeout: .seconds(20), "a slow push under way") {
            slowTokens.contains { !harness.fcm.log.pushes(to: $0).isEmpty }
        }
        // Requested together, they are called together: within 5 s, where a ninth call waiting for one of eight
        // connections would wait for the first calls' 10 s time-out.
        try await eventually(timeout: .seconds(5), "all ten slow pushes under way at once (PUSH_CONCURRENCY 16)") {
            slowTokens.allSatisfy { !harness.fcm.log.pushes(to: $0).isEmpty }
        }
        // The slow calls answer only once released: the quick push goes out while they are still under way (within
        // 8 s, before their 10 s time-out could free a serial dispatcher or a connection).
        try await harness.push(request(quick.id))
        try await eventually(timeout: .seconds(8), "the quick push sent while the slow calls are held") {
            !harness.fcm.log.pushes(to: quickToken).isEmpty
        }
        harness.fcm.slowCallsReleased.withLock { $0 = true }
        try await withThrowingTaskGroup { group in
            for (push, userId) in slowPushes {
                group.addTask {
                    try await harness.outcome(of: push.notificationId, userId: userId)?.payload is PushSent
                }
            }
            for try await sent in group { #expect(sent) }
        }
    }

    @Test("the device registry: upsert, a token moving to another user, removal; the log is for admins; bad input")
    func registry() async throws {
        let harness = try await NotificationHarness.get()
        let client = harness.client
        let token = "ok-\(UUID())"
        let first = try await harness.user(devices: [("android", token)])
        let second = try await harness.user(devices: [("android", token)])
        #expect(
            try await client.request(.DELETE, "/v1/devices/\(token)", token: first.token).status == 404,
            "the token moved to the second user")
        #expect(try await client.request(.DELETE, "/v1/devices/\(token)", token: second.token).status == 204)
        let badPlatform = try await client.request(
            .PUT, "/v1/devices", token: first.token, body: Data(#"{"platform":"windows","token":"x"}"#.utf8))
        #expect(badPlatform.status == 400)
        let emptyToken = try await client.request(
            .PUT, "/v1/devices", token: first.token, body: Data(#"{"platform":"ios","token":"  "}"#.utf8))
        #expect(emptyToken.errorCode == "VALIDATION_FAILED")
        #expect(
            try await client.request(.PUT, "/v1/devices", body: Data(#"{"platform":"ios","token":"x"}"#.utf8)).status
                == 401)
        #expect(try await client.get("/v1/notifications?userId=\(first.id)", token: first.token).status == 403)
        let admin = try await TestAuth.token(uniqueName("admin"), .admin)
        #expect(try await client.get("/v1/notifications", token: admin).errorCode == "VALIDATION_FAILED")
        #expect(
            try await client.get("/v1/notifications?userId=x&limit=0", token: admin).errorCode == "VALIDATION_FAILED")
        #expect(try await client.get("/v1/notifications?userId=a%00b", token: admin).errorCode == "INVALID_CHARACTER")
        #expect(try await client.get("/v1/notifications?userId=a%20b", token: admin).errorCode == "VALIDATION_FAILED")
    }

    @Test("device tokens: the platform's format and a limit in bytes; at most 10 devices a user, the oldest dropped")
    func deviceLimits() async throws {
        let harness = try await NotificationHarness.get()
        let client = harness.client
        let user = try await harness.user(devices: [])
        func register(_ platform: String, _ token: String) async throws -> ServiceClient.Answer {
            try await client.request(
                .PUT, "/v1/devices", token: user.token,
                body: try JSONSerialization.data(withJSONObject: ["platform": platform, "token": token]))
        }
        for (platform, token) in [
            ("ios", "not-hex-\(UUID())"), ("ios", "abc"), ("ios", String(repeating: "a", count: 202)),
            ("android", "has space \(UUID())"), ("android", "slash/\(UUID())"),
            ("android", String(repeating: "a", count: 4097)), ("android", "é" + String(repeating: "a", count: 4095)),
        ] {
            let answer = try await register(platform, token)
            #expect(answer.status == 400, "\(platform) \(token.prefix(20)) was accepted")
            #expect(answer.errorCode == "VALIDATION_FAILED")
        }
        let tokens = (0..<11).map { "cap-\($0)-\(UUID())" }
        for token in tokens { #expect(try await register("android", token).status == 200) }
        #expect(try await register("ios", APNsTestToken.make(APNsTestToken.ok).uppercased()).status == 200)
        for (index, token) in tokens.enumerated() {
            let removed = try await client.request(.DELETE, "/v1/devices/\(token)", token: user.token).status
            #expect(removed == (index < 2 ? 404 : 204), "device \(index)")
        }
    }
}

extension Data {
    init?(base64URLEncoded text: String) {
        var base64 = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while base64.count % 4 != 0 { base64 += "=" }
        self.init(base64Encoded: base64)
    }
}

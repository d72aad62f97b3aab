import AsyncHTTPClient
import Contracts
import Foundation
import JWTKit
import Kafka
import Logging
import NIOCore
import NIOHTTP1
import Synchronization

/// One push to one device.
package struct PushMessage: Sendable, Equatable {
    package var notificationId: String
    package var kind: PushKind
    package var title: String
    package var body: String
    package var data: [String: String]
    package var priority: PushPriority
    package var collapseKey: String?
    package var ttlSeconds: Int?
    package var sound: String?
    /// Run the app's background handler on arrival (``PushRequested/wakesApp``).
    package var wakesApp: Bool
}

/// What a provider made of a push.
package enum PushOutcome: Sendable, Equatable {
    case sent(status: Int, answer: String)
    /// Try again later (429, 5xx, a time-out); `after` is the provider's Retry-After if it gave one.
    case retry(status: Int?, answer: String, after: Duration?)
    /// The device token is dead (FCM UNREGISTERED or an invalid token; APNs 410 or BadDeviceToken).
    case invalidToken(status: Int, answer: String)
    /// Refused for good (another 4xx).
    case failed(status: Int?, answer: String)
}

/// Sends pushes to one platform's devices.
package protocol PushProvider: Sendable {
    /// `fcm`, `apns` or `log`.
    var name: String { get }
    func send(_ message: PushMessage, to token: String) async -> PushOutcome
}

/// Records what would be sent, for local runs without FCM or APNs credentials: the kind, priority and sizes,
/// never the whole token or the text (a chat preview is the users' words).
package struct LogPushProvider: PushProvider {
    package let name = "log"
    let platform: String
    let logger: Logger

    package func send(_ message: PushMessage, to token: String) async -> PushOutcome {
        logger.info(
            "push (log provider)",
            metadata: [
                "push.platform": "\(platform)", "push.token": "\(DeviceRules.redacted(token))",
                "push.kind": "\(message.kind)", "push.priority": "\(message.priority.rawValue)",
                "push.title.bytes": "\(message.title.utf8.count)", "push.body.bytes": "\(message.body.utf8.count)",
                "push.data.keys": "\(message.data.keys.sorted().joined(separator: ","))",
            ]
        )
        return .sent(status: 200, answer: "logged")
    }
}

/// A status and the Retry-After it came with, as a retry outcome (or nil if the status is not worth a retry).
func retryOutcome(status: Int, headers: HTTPHeaders, answer: String) -> PushOutcome? {
    guard status == 429 || status >= 500 else { return nil }
    let after = headers.first(name: "Retry-After").flatMap { Int($0.trimmingCharacters(in: .whitespaces)) }.map {
        Duration.seconds($0)
    }
    return .retry(status: status, answer: answer, after: after)
}

/// Runs `request` and reads at most 64 KiB of the answer; a transport failure or time-out is a retry.
func exchange(_ request: HTTPClientRequest, client: HTTPClient, timeout: Duration) async -> Result<
    (Int, HTTPHeaders, String), PushTransportError
> {
    do {
        let response = try await client.execute(request, timeout: .milliseconds(timeout.milliseconds))
        let body = try await response.body.collect(upTo: 64 * 1024)
        return .success((Int(response.status.code), response.headers, String(buffer: body)))
    } catch {
        return .failure(PushTransportError(description: "\(error)"))
    }
}

package struct PushTransportError: Error, CustomStringConvertible {
    package var description: String
}

// MARK: FCM

/// Firebase Cloud Messaging HTTP v1: a service account's signed assertion buys an OAuth2 access token (cached until
/// shortly before it expires), then `POST {base}/v1/projects/{project}/messages:send` per device.
package final class FCMProvider: PushProvider {
    package let name = "fcm"

    /// The fields of a Google service-account JSON file that matter here.
    package struct ServiceAccount: Decodable, Sendable {
        package var projectId: String
        package var clientEmail: String
        package var privateKey: String
        package var tokenURI: String

        enum CodingKeys: String, CodingKey {
            case projectId = "project_id"
            case clientEmail = "client_email"
            case privateKey = "private_key"
            case tokenURI = "token_uri"
        }
    }

    struct Assertion: JWTPayload {
        var iss: String
        var scope: String
        var aud: String
        var iat: Int
        var exp: Int
        func verify(using algorithm: some JWTAlgorithm) throws {}
    }

    struct AccessToken: Decodable {
        var accessToken: String
        var expiresIn: Int
        enum CodingKeys: String, CodingKey {
            case accessToken = "access_token"
            case expiresIn = "expires_in"
        }
    }

    let account: ServiceAccount
    let baseURL: String
    let tokenURL: String
    let client: HTTPClient
    let timeout: Duration
    let keys: JWTKeyCollection
    private let cached = Mutex<(token: String, expiresAt: Date)?>(nil)

    package init(account: ServiceAccount, baseURL: String, tokenURL: String?, client: HTTPClient, timeout: Duration)
        async throws
    {
        self.account = account
        self.baseURL = baseURL.hasSuffix("/") ? String(baseURL.dropLast()) : baseURL
        self.tokenURL = tokenURL ?? account.tokenURI
        self.client = client
        self.timeout = timeout
        self.keys = JWTKeyCollection()
        await keys.add(rsa: try Insecure.RSA.PrivateKey(pem: account.privateKey), digestAlgorithm: .sha256)
    }

    /// The cached access token, or a new one from the token endpoint.
    func accessToken(now: Date = Date()) async throws -> String {
        if let cached = cached.withLock({ $0 }), cached.expiresAt > now.addingTimeInterval(60) { return cached.token }
        let issuedAt = Int(now.timeIntervalSince1970)
        let assertion = try await keys.sign(
            Assertion(
                iss: account.clientEmail, scope: "https://www.googleapis.com/auth/firebase.messaging", aud: tokenURL,
                iat: issuedAt,
                exp: issuedAt + 3600
            )
        )
        var request = HTTPClientRequest(url: tokenURL)
        request.method = .POST
        request.headers.add(name: "Content-Type", value: "application/x-www-form-urlencoded")
        request.body = .bytes(
            ByteBuffer(
                string: "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion=\(assertion)"))
        let (status, _, answer) = try await exchange(request, client: client, timeout: timeout).get()
        guard status == 200, let token = try? JSONDecoder().decode(AccessToken.self, from: Data(answer.utf8)) else {
            throw PushTransportError(description: "the FCM token endpoint answered \(status): \(answer.prefix(200))")
        }
        cached.withLock { $0 = (token.accessToken, now.addingTimeInterval(Double(token.expiresIn))) }
        return token.accessToken
    }

    func body(_ message: PushMessage, token: String) -> Data {
        let high = message.priority == .high || message.wakesApp
        var android: [String: Any] = ["priority": high ? "HIGH" : "NORMAL"]
        if let ttl = message.ttlSeconds { android["ttl"] = "\(ttl)s" }
        if let collapseKey = message.collapseKey { android["collapse_key"] = collapseKey }
        var fields: [String: Any] = ["token": token, "android": android]
        if message.wakesApp {
            // Data only, at high priority: Android runs the app's background handler (which shows the notification
            // from the data and confirms receipt); a `notification` block would go to the tray instead. An iOS app
            // registered through FCM gets what a direct APNs push carries: the alert with content-available.
            var data = message.data
            data["notificationId"] = message.notificationId
            data["title"] = data["title"] ?? message.title
            data["body"] = data["body"] ?? message.body
            data["channel"] = data["channel"] ?? message.kind.rawValue
            if let sound = message.sound { data["sound"] = data["sound"] ?? sound }
            fields["data"] = data
            fields["apns"] = [
                "headers": APNsProvider.headers(message, now: Date()),
                "payload": APNsProvider.payload(message),
            ]
        } else {
            var notification: [String: Any] = ["channel_id": message.kind.rawValue]
            if let sound = message.sound { notification["sound"] = sound }
            android["notification"] = notification
            fields["android"] = android
            fields["notification"] = ["title": message.title, "body": message.body]
            fields["data"] = message.data.merging(["notificationId": message.notificationId]) { _, id in id }
        }
        let payload: [String: Any] = ["message": fields]
        return (try? JSONSerialization.data(withJSONObject: payload, options: [.sortedKeys])) ?? Data()
    }

    package func send(_ message: PushMessage, to token: String) async -> PushOutcome {
        let accessToken: String
        do {
            accessToken = try await self.accessToken()
        } catch {
            return .retry(status: nil, answer: "\(error)", after: nil)
        }
        var request = HTTPClientRequest(url: "\(baseURL)/v1/projects/\(account.projectId)/messages:send")
        request.method = .POST
        request.headers.add(name: "Authorization", value: "Bearer \(accessToken)")
        request.headers.add(name: "Content-Type", value: "application/json; charset=UTF-8")
        request.body = .bytes(ByteBuffer(data: body(message, token: token)))
        switch await exchange(request, client: client, timeout: timeout) {
        case .failure(let error):
            return .retry(status: nil, answer: error.description, after: nil)
        case .success(let (status, headers, answer)):
            if status == 200 { return .sent(status: status, answer: answer) }
            if status == 401 {
                cached.withLock { $0 = nil }
                return .retry(status: status, answer: answer, after: .zero)
            }
            if let retry = retryOutcome(status: status, headers: headers, answer: answer) { return retry }
            if answer.contains("UNREGISTERED")
                || (answer.contains("INVALID_ARGUMENT") && answer.localizedCaseInsensitiveContains("token"))
            {
                return .invalidToken(status: status, answer: answer)
            }
            return .failed(status: status, answer: answer)
        }
    }
}

// MARK: APNs

/// Apple Push Notification service over HTTP/2: an ES256 provider token (key id, team id; refreshed before
/// Apple's one-hour limit), `POST {base}/3/device/{token}` with apns-topic, apns-push-type, apns-priority,
/// apns-expiration and apns-collapse-id.
package final class APNsProvider: PushProvider {
    package let name = "apns"
    let keyId: String
    let teamId: String
    let topic: String
    let baseURL: String
    let client: HTTPClient
    let timeout: Duration
    let refreshAfter: TimeInterval
    let keys: JWTKeyCollection
    private let cached = Mutex<(token: String, issuedAt: Date)?>(nil)

    package init(
        privateKeyPEM: String, keyId: String, teamId: String, topic: String, baseURL: String, client: HTTPClient,
        timeout: Duration,
        refreshAfter: Duration = .seconds(50 * 60)
    ) async throws {
        self.keyId = keyId
        self.teamId = teamId
        self.topic = topic
        self.baseURL = baseURL.hasSuffix("/") ? String(baseURL.dropLast()) : baseURL
        self.client = client
        self.timeout = timeout
        self.refreshAfter = refreshAfter.timeInterval
        self.keys = JWTKeyCollection()
        await keys.add(ecdsa: try ES256PrivateKey(pem: privateKeyPEM), kid: JWKIdentifier(string: keyId))
    }

    struct ProviderClaims: JWTPayload {
        var iss: String
        var iat: Int
        func verify(using algorithm: some JWTAlgorithm) throws {}
    }

    /// The provider token, signed again once it is `refreshAfter` old.
    func providerToken(now: Date = Date()) async throws -> String {
        if let cached = cached.withLock({ $0 }), now.timeIntervalSince(cached.issuedAt) < refreshAfter {
            return cached.token
        }
        let token = try await keys.sign(
            ProviderClaims(iss: teamId, iat: Int(now.timeIntervalSince1970)), kid: JWKIdentifier(string: keyId))
        cached.withLock { $0 = (token, now) }
        return token
    }

    /// The APNs payload of `message`: the alert, its sound, the data; `content-available` when it wakes the app.
    static func payload(_ message: PushMessage) -> [String: Any] {
        var aps: [String: Any] = ["alert": ["title": message.title, "body": message.body]]
        aps["sound"] = message.sound.map { "\($0).caf" } ?? "default"
        // With the alert, so a backgrounded app's handler runs too (apns-push-type stays `alert`).
        if message.wakesApp { aps["content-available"] = 1 }
        var payload: [String: Any] = ["aps": aps]
        for (key, value) in message.data where key != "aps" { payload[key] = value }
        payload["notificationId"] = message.notificationId
        return payload
    }

    /// The APNs request headers of `message` other than the authorization and the topic.
    static func headers(_ message: PushMessage, now: Date) -> [String: String] {
        var headers = [
            "apns-push-type": "alert",
            "apns-priority": message.priority == .high || message.wakesApp ? "10" : "5",
            "apns-expiration": String(message.ttlSeconds.map { Int(now.timeIntervalSince1970) + $0 } ?? 0),
        ]
        if let collapseKey = message.collapseKey { headers["apns-collapse-id"] = String(collapseKey.prefix(64)) }
        return headers
    }

    func body(_ message: PushMessage) -> Data {
        (try? JSONSerialization.data(withJSONObject: Self.payload(message), options: [.sortedKeys])) ?? Data()
    }

    package func send(_ message: PushMessage, to token: String) async -> PushOutcome {
        let providerToken: String
        do {
            providerToken = try await self.providerToken()
        } catch {
            return .failed(status: nil, answer: "could not sign the APNs provider token: \(error)")
        }
        var request = HTTPClientRequest(url: "\(baseURL)/3/device/\(token)")
        request.method = .POST
        request.headers.add(name: "authorization", value: "bearer \(providerToken)")
        request.headers.add(name: "apns-topic", value: topic)
        for (name, value) in Self.headers(message, now: Date()).sorted(by: { $0.key < $1.key }) {
            request.headers.add(name: name, value: value)
        }
        request.headers.add(name: "content-type", value: "application/json")
        request.body = .bytes(ByteBuffer(data: body(message)))
        switch await exchange(request, client: client, timeout: timeout) {
        case .failure(let error):
            return .retry(status: nil, answer: error.description, after: nil)
        case .success(let (status, headers, answer)):
            if status == 200 { return .sent(status: status, answer: headers.first(name: "apns-id") ?? "") }
            if status == 410 || answer.contains("BadDeviceToken") || answer.contains("Unregistered") {
                return .invalidToken(status: status, answer: answer)
            }
            if status == 403, answer.contains("ExpiredProviderToken") {
                cached.withLock { $0 = nil }
                return .retry(status: status, answer: answer, after: .zero)
            }
            if let retry = retryOutcome(status: status, headers: headers, answer: answer) { return retry }
            return .failed(status: status, answer: answer)
        }
    }
}

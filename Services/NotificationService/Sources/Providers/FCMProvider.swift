import AsyncHTTPClient
import Contracts
import Foundation
import JWTKit
import Kafka
import Logging
import NIOCore
import NIOHTTP1
import Synchronization

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

    /// The `messages:send` body of `message` for the device `token`.
    func request(_ message: PushMessage, token: String, now: Date) -> FCMRequest {
        let high = message.priority == .high || message.wakesApp
        var android = FCMRequest.Android(
            priority: high ? "HIGH" : "NORMAL", ttl: message.ttlSeconds.map { "\($0)s" },
            collapseKey: message.collapseKey)
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
            return FCMRequest(
                message: FCMRequest.Message(
                    token: token, android: android, data: data,
                    apns: FCMRequest.APNs(
                        headers: APNsProvider.headers(message, now: now), payload: APNsPayload(message))))
        }
        android.notification = FCMRequest.AndroidNotification(channelId: message.kind.rawValue, sound: message.sound)
        return FCMRequest(
            message: FCMRequest.Message(
                token: token, android: android,
                data: message.data.merging(["notificationId": message.notificationId]) { _, id in id },
                notification: FCMRequest.Notification(title: message.title, body: message.body)))
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
        do {
            request.body = .bytes(
                ByteBuffer(data: try ContractCoding.encode(self.request(message, token: token, now: Date()))))
        } catch {
            return .failed(status: nil, answer: "could not encode the FCM request: \(error)")
        }
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

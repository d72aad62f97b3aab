import AsyncHTTPClient
import Contracts
import Foundation
import JWTKit
import Kafka
import Logging
import NIOCore
import NIOHTTP1
import Synchronization

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
        do {
            request.body = .bytes(ByteBuffer(data: try ContractCoding.encode(APNsPayload(message))))
        } catch {
            return .failed(status: nil, answer: "could not encode the APNs payload: \(error)")
        }
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

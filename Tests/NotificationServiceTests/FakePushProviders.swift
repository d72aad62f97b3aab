import Foundation
import Hummingbird
import HummingbirdHTTP2
import JWTKit
import NIOSSL
import RealtimeTesting
import ServiceLifecycle
import Synchronization
import TestSupport

/// A request a fake provider received.
struct ReceivedPush: Sendable {
    var path: String
    var headers: [String: String]
    var body: Data
    var at: Date
    var json: [String: Any] { ((try? JSONSerialization.jsonObject(with: body)) as? [String: Any]) ?? [:] }
}

/// What a fake answers for a device token, by its prefix: `ok-` 200; `flaky-` 503 once, then 200; `busy-` 429 with
/// Retry-After: 1 once, then 200; `down-` 503 always; `slow-` 200 once the test releases slow calls (or after
/// 20 s); `unregistered-` / `gone-` the
/// platform's dead-token answer; `bad-` APNs' BadDeviceToken.
/// APNs tokens are hexadecimal (the service refuses others), so iOS tests spell the prefixes in hex: see
/// ``APNsTestToken``.
/// APNs device tokens for tests: 64 hexadecimal digits whose first four choose the fake's answer.
enum APNsTestToken {
    static let ok = "a0a0"
    /// 429 with Retry-After: 1 once, then 200.
    static let busy = "b0b0"
    /// 410 Unregistered.
    static let gone = "dead"
    /// 400 BadDeviceToken.
    static let bad = "bad0"

    static func make(_ behaviour: String) -> String {
        (behaviour + UUID().uuidString + UUID().uuidString).replacingOccurrences(of: "-", with: "").lowercased()
            .prefix(64).description
    }
}

enum DeviceBehaviour {
    static func firstAttempt(_ token: String, attempt: Int) -> (status: Int, retryAfter: Int?)? {
        if token.hasPrefix("flaky-"), attempt == 1 { return (503, nil) }
        if token.hasPrefix("busy-") || token.hasPrefix(APNsTestToken.busy), attempt == 1 { return (429, 1) }
        if token.hasPrefix("down-") { return (503, nil) }
        return nil
    }
}

/// Records requests and counts attempts per device token.
final class FakeLog: Sendable {
    private let requests = Mutex<[ReceivedPush]>([])
    private let attempts = Mutex<[String: Int]>([:])

    func record(_ push: ReceivedPush, token: String) -> Int {
        requests.withLock { $0.append(push) }
        return attempts.withLock { attempts in
            attempts[token, default: 0] += 1
            return attempts[token]!
        }
    }

    func pushes(to token: String) -> [ReceivedPush] {
        requests.withLock { $0.filter { $0.path.contains(token) || $0.json.description.contains(token) } }
    }
    var all: [ReceivedPush] { requests.withLock { $0 } }
}

func headers(of request: Request) -> [String: String] {
    var headers: [String: String] = [:]
    for field in request.headers { headers[field.name.canonicalName.lowercased()] = field.value }
    return headers
}

func runInBackground(_ app: some ApplicationProtocol, port: Int) async throws {
    let group = ServiceGroup(configuration: .init(services: [app], gracefulShutdownSignals: [], logger: app.logger))
    Task { try await group.run() }
    try await eventually(timeout: .seconds(10), "port \(port) listening") { isListening(port: port) }
}

/// FCM HTTP v1 over HTTP/1.1: the OAuth2 token endpoint (checking the service account's RS256 assertion) and
/// `messages:send` (checking the bearer token).
final class FakeFCM: Sendable {
    let port = TestPorts.allocate()
    let log = FakeLog()
    let tokenRequests = Mutex<[[String: String]]>([])
    /// Whether `slow-` calls may answer; until then they wait.
    let slowCallsReleased = Mutex(false)
    let publicKeyPEM: String
    let accessToken = "fake-access-token-1"

    init(publicKeyPEM: String) { self.publicKeyPEM = publicKeyPEM }

    var baseURL: String { "http://127.0.0.1:\(port)" }

    func start() async throws {
        let router = Router()
        let keys = JWTKeyCollection()
        await keys.add(rsa: try Insecure.RSA.PublicKey(pem: publicKeyPEM), digestAlgorithm: .sha256)
        router.post("token") { request, _ -> Response in
            let form = String(buffer: try await request.body.collect(upTo: 1 << 16))
            var fields: [String: String] = [:]
            for pair in form.split(separator: "&") {
                let parts = pair.split(separator: "=", maxSplits: 1).map {
                    String($0).removingPercentEncoding ?? String($0)
                }
                if parts.count == 2 { fields[parts[0]] = parts[1] }
            }
            struct Assertion: JWTPayload {
                var iss: String
                var scope: String
                var aud: String
                var iat: Int
                var exp: Int
                func verify(using algorithm: some JWTAlgorithm) throws {}
            }
            guard fields["grant_type"] == "urn:ietf:params:oauth:grant-type:jwt-bearer", let jwt = fields["assertion"],
                let claims = try? await keys.verify(jwt, as: Assertion.self)
            else {
                return Response(
                    status: .badRequest, body: .init(byteBuffer: ByteBuffer(string: #"{"error":"invalid_grant"}"#)))
            }
            self.tokenRequests.withLock {
                $0.append([
                    "iss": claims.iss, "scope": claims.scope, "aud": claims.aud,
                    "lifetime": String(claims.exp - claims.iat),
                ])
            }
            let body = #"{"access_token":"\#(self.accessToken)","expires_in":3599,"token_type":"Bearer"}"#
            return Response(
                status: .ok, headers: [.contentType: "application/json"],
                body: .init(byteBuffer: ByteBuffer(string: body)))
        }
        router.post("v1/projects/:project/messages:send") { request, _ -> Response in
            let head = headers(of: request)
            let body = Data(buffer: try await request.body.collect(upTo: 1 << 20))
            let push = ReceivedPush(path: request.uri.path, headers: head, body: body, at: Date())
            let token = ((push.json["message"] as? [String: Any])?["token"] as? String) ?? ""
            let attempt = self.log.record(push, token: token)
            guard head["authorization"] == "Bearer \(self.accessToken)" else {
                return Response(
                    status: .unauthorized,
                    body: .init(byteBuffer: ByteBuffer(string: #"{"error":{"code":401,"status":"UNAUTHENTICATED"}}"#)))
            }
            if let (status, retryAfter) = DeviceBehaviour.firstAttempt(token, attempt: attempt) {
                var fields: HTTPFields = [.contentType: "application/json"]
                if let retryAfter { fields[.retryAfter] = String(retryAfter) }
                return Response(
                    status: .init(code: status), headers: fields,
                    body: .init(
                        byteBuffer: ByteBuffer(string: #"{"error":{"code":\#(status),"status":"UNAVAILABLE"}}"#)))
            }
            if token.hasPrefix("slow-") {
                let deadline = ContinuousClock.now + .seconds(20)
                while !self.slowCallsReleased.withLock({ $0 }), ContinuousClock.now < deadline {
                    try await Task.sleep(for: .milliseconds(10))
                }
            }
            if token.hasPrefix("unregistered-") {
                let answer =
                    #"{"error":{"code":404,"message":"Requested entity was not found.","status":"NOT_FOUND","details":[{"@type":"type.googleapis.com/google.firebase.fcm.v1.FcmError","errorCode":"UNREGISTERED"}]}}"#
                return Response(
                    status: .notFound, headers: [.contentType: "application/json"],
                    body: .init(byteBuffer: ByteBuffer(string: answer)))
            }
            let answer = #"{"name":"projects/test-project/messages/\#(UUID().uuidString)"}"#
            return Response(
                status: .ok, headers: [.contentType: "application/json"],
                body: .init(byteBuffer: ByteBuffer(string: answer)))
        }
        try await runInBackground(
            Application(router: router, configuration: .init(address: .hostname("127.0.0.1", port: port))), port: port)
    }
}

/// APNs over HTTP/2 with TLS (a self-signed certificate the service is told to trust): `POST /3/device/{token}`,
/// checking the ES256 provider token.
final class FakeAPNs: Sendable {
    let port = TestPorts.allocate()
    let log = FakeLog()
    let publicKeyPEM: String
    let certificateFile: String
    let keyFile: String

    init(publicKeyPEM: String, certificateFile: String, keyFile: String) {
        self.publicKeyPEM = publicKeyPEM
        self.certificateFile = certificateFile
        self.keyFile = keyFile
    }

    var baseURL: String { "https://127.0.0.1:\(port)" }

    func start() async throws {
        let router = Router()
        let keys = JWTKeyCollection()
        await keys.add(ecdsa: try ES256PublicKey(pem: publicKeyPEM))
        struct ProviderClaims: JWTPayload {
            var iss: String
            var iat: Int
            func verify(using algorithm: some JWTAlgorithm) throws {}
        }
        router.post("3/device/:token") { request, context -> Response in
            let token = try context.parameters.require("token")
            let head = headers(of: request)
            let body = Data(buffer: try await request.body.collect(upTo: 1 << 20))
            let attempt = self.log.record(
                ReceivedPush(path: request.uri.path, headers: head, body: body, at: Date()), token: token)
            guard let bearer = head["authorization"], bearer.hasPrefix("bearer "),
                (try? await keys.verify(String(bearer.dropFirst(7)), as: ProviderClaims.self)) != nil
            else {
                return Response(
                    status: .forbidden,
                    body: .init(byteBuffer: ByteBuffer(string: #"{"reason":"InvalidProviderToken"}"#)))
            }
            if let (status, retryAfter) = DeviceBehaviour.firstAttempt(token, attempt: attempt) {
                var fields: HTTPFields = [:]
                if let retryAfter { fields[.retryAfter] = String(retryAfter) }
                return Response(
                    status: .init(code: status), headers: fields,
                    body: .init(byteBuffer: ByteBuffer(string: #"{"reason":"ServiceUnavailable"}"#)))
            }
            if token.hasPrefix(APNsTestToken.gone) {
                return Response(
                    status: .gone,
                    body: .init(byteBuffer: ByteBuffer(string: #"{"reason":"Unregistered","timestamp":1700000000000}"#))
                )
            }
            if token.hasPrefix(APNsTestToken.bad) {
                return Response(
                    status: .badRequest, body: .init(byteBuffer: ByteBuffer(string: #"{"reason":"BadDeviceToken"}"#)))
            }
            return Response(status: .ok, headers: [.init("apns-id")!: UUID().uuidString])
        }
        let tls = TLSConfiguration.makeServerConfiguration(
            certificateChain: try NIOSSLCertificate.fromPEMFile(certificateFile).map { .certificate($0) },
            privateKey: .privateKey(try NIOSSLPrivateKey(file: keyFile, format: .pem))
        )
        let app = Application(
            router: router, server: try .http2Upgrade(tlsConfiguration: tls),
            configuration: .init(address: .hostname("127.0.0.1", port: port))
        )
        try await runInBackground(app, port: port)
    }
}

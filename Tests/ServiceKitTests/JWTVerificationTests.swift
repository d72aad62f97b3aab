import Contracts
import Foundation
import HTTPTypes
import Hummingbird
import JWTKit
import Logging
import NIOCore
import RealtimeTesting
import ServiceKit
import ServiceLifecycle
import TestSupport
import Testing

/// Token verification against hostile tokens and a changing identity provider: key rotation through a JWKS URL,
/// clock skew, token types and weak keys.
@Suite("JWT verification")
struct JWTVerificationTests {
    static let start = Date(timeIntervalSince1970: 1_800_000_000)

    /// A verifier of `key`'s tokens whose clock stands at ``start``.
    static func verifier(
        for key: SigningKey, issuer: String = TestAuth.issuerName, leeway: Duration = .seconds(60)
    ) async -> AccessTokenVerifier {
        let keys = JWTKeyCollection()
        await keys.add(ecdsa: key.privateKey.publicKey)
        return AccessTokenVerifier(
            keys: keys, issuer: issuer, audience: TestAuth.audience, leeway: leeway, now: { Self.start })
    }

    @Test(
        "a rotated key is fetched when a token names its kid, at most once per 30 s, and the old key is dropped (its tokens accepted before too)"
    )
    func unknownKidRefreshesTheKeySet() async throws {
        let clock = Locked(Self.start)
        let first = SigningKey(kid: "key-1")
        let second = SigningKey(kid: "key-2")
        let server = FakeJWKSServer(keys: [first])
        try await server.run {
            let verifier = try await server.verifier(now: { clock.value })
            let firstToken = try await first.sign(Claims(now: Self.start))
            #expect(try await verifier.verify(firstToken).userId == "c-1")
            #expect(try await verifier.verify(firstToken).userId == "c-1")
            #expect(server.fetches == 1)

            server.publish([second])
            let rotated = try await second.sign(Claims(now: Self.start))
            await expectRefused(rotated, by: verifier, code: .invalidToken, mentioning: "key-2")
            #expect(server.fetches == 1, "a second fetch within 30 s of the first")

            clock.withLock { $0 += 31 }
            #expect(try await verifier.verify(rotated).userId == "c-1")
            #expect(server.fetches == 2)
            await expectRefused(
                try await first.sign(Claims(now: Self.start)), by: verifier, code: .invalidToken, mentioning: "key-1")
            await expectRefused(firstToken, by: verifier, code: .invalidToken, mentioning: "key-1")

            let flood = try await (0..<50).asyncMap { index in
                try await SigningKey(kid: "random-\(index)").sign(Claims(now: Self.start))
            }
            for token in flood { await expectRefused(token, by: verifier, code: .invalidToken) }
            #expect(server.fetches == 2, "a flood of unknown kids right after a fetch fetches nothing")

            clock.withLock { $0 += 31 }
            try await withThrowingTaskGroup(of: Void.self) { group in
                for token in flood {
                    group.addTask { await expectRefused(token, by: verifier, code: .invalidToken) }
                }
                try await group.waitForAll()
            }
            #expect(server.fetches == 3, "concurrent unknown kids share one fetch")
        }
    }

    @Test("requests naming a new kid while its key set is being fetched wait for that fetch and succeed")
    func concurrentMissesShareOneFetch() async throws {
        let clock = Locked(Self.start)
        let first = SigningKey(kid: "key-1")
        let second = SigningKey(kid: "key-2")
        let server = FakeJWKSServer(keys: [first])
        try await server.run {
            let verifier = try await server.verifier(now: { clock.value })
            server.publish([first, second], answeringAfter: .milliseconds(300))
            clock.withLock { $0 += 31 }
            let token = try await second.sign(Claims(now: Self.start))
            let identities = try await withThrowingTaskGroup(of: Identity.self) { group in
                for _ in 0..<10 { group.addTask { try await verifier.verify(token) } }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(identities.count == 10)
            #expect(server.fetches == 2)
        }
    }

    @Test("the service group's refresh job fetches the key set periodically, without any unknown kid")
    func periodicRefresh() async throws {
        let clock = Locked(Self.start)
        let first = SigningKey(kid: "key-1")
        let second = SigningKey(kid: "key-2")
        let server = FakeJWKSServer(keys: [first])
        let verifier = try await server.run { try await server.verifier(now: { clock.value }) }
        server.publish([second])
        let rotated = try await second.sign(Claims(now: Self.start))
        let job = try #require(verifier.keyRefreshJob(every: .milliseconds(100)))
        await expectRefused(rotated, by: verifier, code: .invalidToken)
        try await server.run(with: [job]) {
            try await eventually(timeout: .seconds(10), "the refresh job fetched the rotated key set") {
                (try? await verifier.verify(rotated)) != nil
            }
        }
        #expect(server.fetches >= 2)

        let fileVerifier = try await HTTPErrorAndAuthTests.verifier()
        #expect(fileVerifier.keyRefreshJob(every: .seconds(1)) == nil)
    }

    @Test("a service with JWT_JWKS_URL runs the refresh job in its service group", .timeLimit(.minutes(1)))
    func platformRunsTheRefreshJob() async throws {
        let server = FakeJWKSServer(keys: [SigningKey(kid: "key-1")])
        let environment = try testServiceEnvironment(
            extra: ["JWT_PUBLIC_KEY_FILE": "", "JWT_JWKS_URL": server.url.absoluteString])
        var configuration = try ServiceConfiguration(
            serviceName: "jwks-test", defaultPort: 0, defaultSchema: "jwks", environment: environment)
        configuration.auth.jwksRefreshInterval = .milliseconds(100)
        let refreshedEvery100ms = configuration
        let platform = try await server.run {
            try await ServicePlatform.prepare(
                configuration: refreshedEvery100ms, migrations: MigrationSet(component: "jwks-test", migrations: []),
                logger: TestInfrastructure.logger("jwks-test"))
        }
        #expect(server.fetches == 1)
        try await server.run(with: platform.services) {
            try await eventually(timeout: .seconds(20), "periodic fetches of the key set") { server.fetches >= 3 }
        }
    }

    @Test("a failed refresh keeps the keys held and logs a warning; the next good one replaces them")
    func failedRefreshKeepsKeys() async throws {
        let clock = Locked(Self.start)
        let logs = CapturedLogs()
        let first = SigningKey(kid: "key-1")
        let second = SigningKey(kid: "key-2")
        let server = FakeJWKSServer(keys: [first])
        try await server.run {
            let verifier = try await server.verifier(now: { clock.value }, logger: logs.logger)
            let known = try await first.sign(Claims(now: Self.start))
            let unknown = try await second.sign(Claims(now: Self.start))
            for failure in [FakeJWKSServer.Failure.status(.internalServerError), .body("{\"keys\":")] {
                server.fail(failure)
                clock.withLock { $0 += 31 }
                await expectRefused(unknown, by: verifier, code: .invalidToken)
                #expect(try await verifier.verify(known).userId == "c-1")
            }
            #expect(server.fetches == 3)
            let warnings = logs.messages(at: .warning).filter { $0.contains("could not refresh the JSON Web Key Set") }
            #expect(warnings.count == 2)

            server.publish([second])
            clock.withLock { $0 += 31 }
            #expect(try await verifier.verify(unknown).userId == "c-1")
        }
    }

    @Test("a token without a kid is refused when the keys come from a key set")
    func keySetTokensNeedAKid() async throws {
        let key = SigningKey(kid: "key-1")
        let server = FakeJWKSServer(keys: [key])
        try await server.run {
            let verifier = try await server.verifier(now: { Self.start })
            let collection = JWTKeyCollection()
            await collection.add(ecdsa: key.privateKey)
            let withoutKid = try await collection.sign(Claims(now: Self.start))
            await expectRefused(withoutKid, by: verifier, code: .invalidToken, mentioning: "no signing key")
        }
    }

    @Test(
        "exp, nbf and iat are checked with the leeway against the verifier's clock",
        arguments: [
            (60, Claims(now: fixedNow, exp: fixedNow - 30), nil),
            (60, Claims(now: fixedNow, exp: fixedNow - 61), ErrorCode.tokenExpired),
            (0, Claims(now: fixedNow, exp: fixedNow - 1), .tokenExpired),
            (0, Claims(now: fixedNow, exp: fixedNow), .tokenExpired),
            (60, Claims(now: fixedNow, nbf: fixedNow + 30), nil),
            (60, Claims(now: fixedNow, nbf: fixedNow + 61), .tokenNotYetValid),
            (0, Claims(now: fixedNow, nbf: fixedNow + 1), .tokenNotYetValid),
            (60, Claims(now: fixedNow, iat: fixedNow + 30), nil),
            (60, Claims(now: fixedNow, iat: fixedNow + 61), .tokenNotYetValid),
            (60, Claims(now: fixedNow, nbf: fixedNow - 3600, iat: fixedNow - 3600), nil),
            // Signed, but with times no timestamp names (formatting them into the refusal trapped before).
            (60, Claims(now: fixedNow, exp: Date(timeIntervalSince1970: 1e16)), .invalidToken),
            (60, Claims(now: fixedNow, exp: Date(timeIntervalSince1970: -1e16)), .invalidToken),
            (60, Claims(now: fixedNow, nbf: Date(timeIntervalSince1970: 1e16)), .invalidToken),
            (60, Claims(now: fixedNow, iat: Date(timeIntervalSince1970: -1e16)), .invalidToken),
        ] as [(Int, Claims, ErrorCode?)]
    )
    func clockSkew(leeway: Int, claims: Claims, refusal: ErrorCode?) async throws {
        let key = SigningKey(kid: "key-1")
        let verifier = await Self.verifier(for: key, leeway: .seconds(leeway))
        let token = try await key.sign(claims)
        if let refusal {
            await expectRefused(token, by: verifier, code: refusal)
        } else {
            #expect(try await verifier.verify(token).userId == "c-1")
        }
    }

    @Test("a long-lived connection is told the token holds until exp plus the leeway, when verify starts refusing it")
    func acceptedUntil() async throws {
        let key = SigningKey(kid: "key-1")
        let verifier = await Self.verifier(for: key, leeway: .seconds(60))
        let token = try await key.sign(Claims(now: Self.start, exp: Self.start + 10))
        let verified = try await verifier.verifyWithExpiry(token)
        #expect(verified.expiresAt == Self.start + 70)
    }

    @Test("a token accepted once is accepted again only inside its times: until exp plus the leeway, from nbf less it")
    func rememberedUntilExpiry() async throws {
        let clock = Locked(Self.start)
        let key = SigningKey(kid: "key-1")
        let keys = JWTKeyCollection()
        await keys.add(ecdsa: key.privateKey.publicKey)
        let verifier = AccessTokenVerifier(
            keys: keys, issuer: TestAuth.issuerName, audience: TestAuth.audience, leeway: .seconds(60),
            now: { clock.value })
        let token = try await key.sign(Claims(now: Self.start, exp: Self.start + 10))
        #expect(try await verifier.verify(token).userId == "c-1")
        clock.withLock { $0 = Self.start + 69.9 }
        #expect(try await verifier.verifyWithExpiry(token).expiresAt == Self.start + 70)
        clock.withLock { $0 = Self.start + 70 }
        await expectRefused(token, by: verifier, code: .tokenExpired)
        clock.withLock { $0 = Self.start }
        #expect(try await verifier.verify(token).userId == "c-1", "accepted again with the clock back inside its times")

        // Valid from its nbf (later than its iat) less the leeway, remembered or not.
        let later = try await key.sign(Claims(now: Self.start, nbf: Self.start + 100, iat: Self.start + 50))
        clock.withLock { $0 = Self.start + 40 }
        #expect(try await verifier.verify(later).userId == "c-1")
        clock.withLock { $0 = Self.start + 39.9 }
        await expectRefused(later, by: verifier, code: .tokenNotYetValid)
    }

    @Test("a token accepted once is not checked again: its signature is not (keys emptied behind the verifier's back)")
    func rememberedTokenSkipsTheSignature() async throws {
        let key = SigningKey(kid: "key-1")
        let keys = JWTKeyCollection()
        await keys.add(ecdsa: key.privateKey.publicKey)
        let verifier = AccessTokenVerifier(
            keys: keys, issuer: TestAuth.issuerName, audience: TestAuth.audience, now: { Self.start })
        let token = try await key.sign(Claims(now: Self.start))
        #expect(try await verifier.verify(token).userId == "c-1")
        _ = await keys.removeAll()
        await expectRefused(try await key.sign(Claims(now: Self.start)), by: verifier, code: .invalidToken)
        #expect(try await verifier.verify(token).userId == "c-1")
    }

    @Test(
        "only access tokens: token_use must be access when present, and is required from a Cognito user pool",
        arguments: [
            (TestAuth.issuerName, nil, nil),
            (TestAuth.issuerName, "access", nil),
            (TestAuth.issuerName, "id", ErrorCode.tokenTypeNotAccepted),
            (TestAuth.issuerName, "refresh", .tokenTypeNotAccepted),
            (JWTVerificationTests.cognitoIssuer, "access", nil),
            (JWTVerificationTests.cognitoIssuer, "id", .tokenTypeNotAccepted),
            (JWTVerificationTests.cognitoIssuer, nil, .tokenTypeNotAccepted),
        ] as [(String, String?, ErrorCode?)]
    )
    func tokenUse(issuer: String, tokenUse: String?, refusal: ErrorCode?) async throws {
        let key = SigningKey(kid: "key-1")
        let verifier = await Self.verifier(for: key, issuer: issuer)
        var claims = Claims(now: Self.start, issuer: issuer)
        claims.tokenUse = tokenUse
        if tokenUse == "access" {
            claims.aud = nil
            claims.clientId = TestAuth.audience
        }
        let token = try await key.sign(claims)
        if let refusal {
            await expectRefused(token, by: verifier, code: refusal, mentioning: tokenUse == "id" ? "ID token" : nil)
        } else {
            #expect(try await verifier.verify(token).userId == "c-1")
        }
    }

    @Test("an RSA PEM key under 2048 bits is a configuration error naming the file")
    func weakPEMKey() async throws {
        let directory = try temporaryDirectory()
        let pem = directory.appendingPathComponent("weak.pem")
        try openssl(["genrsa", "-out", directory.appendingPathComponent("weak-private.pem").path, "1024"])
        try openssl([
            "rsa", "-in", directory.appendingPathComponent("weak-private.pem").path, "-pubout", "-out", pem.path,
        ])
        let settings = ServiceConfiguration.AuthSettings(
            issuer: TestAuth.issuerName, audience: TestAuth.audience, keySource: .publicKeyFile(pem.path))
        await #expect {
            _ = try await AccessTokenVerifier.load(settings, logger: Logger(label: "test"))
        } throws: { error in
            guard let error = error as? ConfigurationError else { return false }
            return error.variable == "JWT_PUBLIC_KEY_FILE" && error.problem.contains(pem.path)
                && error.problem.contains("shorter than 2048 bits")
        }
    }

    @Test("a JWKS key under 2048 bits is skipped with a warning naming its kid; only weak keys is an error")
    func weakKeySetKey() async throws {
        let directory = try temporaryDirectory()
        let strong = SigningKey(kid: "strong-ec")
        let weakJWK = Self.rsaJWK(kid: "weak-rsa", bits: 1024)
        let file = directory.appendingPathComponent("jwks.json")
        try Data(#"{"keys":[\#(weakJWK),\#(strong.jwk)]}"#.utf8).write(to: file)
        let logs = CapturedLogs()
        let settings = ServiceConfiguration.AuthSettings(
            issuer: TestAuth.issuerName, audience: TestAuth.audience, keySource: .jwksFile(file.path))
        let verifier = try await AccessTokenVerifier.load(settings, logger: logs.logger, now: { Self.start })
        #expect(try await verifier.verify(strong.sign(Claims(now: Self.start))).userId == "c-1")
        #expect(
            logs.messages(at: .warning).contains {
                $0.contains("weak-rsa") && $0.contains("RSA key of 1024 bits")
            })
        let forger = SigningKey(kid: "weak-rsa")
        await expectRefused(
            try await forger.sign(Claims(now: Self.start)), by: verifier, code: .invalidToken, mentioning: "weak-rsa")

        try Data(#"{"keys":[\#(weakJWK)]}"#.utf8).write(to: file)
        await #expect {
            _ = try await AccessTokenVerifier.load(settings, logger: Logger(label: "test"))
        } throws: { error in
            guard let error = error as? ConfigurationError else { return false }
            return error.variable == "JWT_JWKS_FILE" && error.problem.contains("weak-rsa")
                && error.problem.contains("1024 bits")
        }
    }

    @Test("a 2048-bit RSA key in a JWKS verifies RS256 tokens")
    func strongRSAKeySetKey() async throws {
        let directory = try temporaryDirectory()
        let keyFile = directory.appendingPathComponent("key.pem")
        try openssl(["genrsa", "-out", keyFile.path, "2048"])
        let privateKey = try Insecure.RSA.PrivateKey(pem: try String(contentsOf: keyFile, encoding: .utf8))
        let file = directory.appendingPathComponent("jwks.json")
        try Data(#"{"keys":[\#(try privateKey.publicKey.jwk(kid: "rsa-1"))]}"#.utf8).write(to: file)
        let settings = ServiceConfiguration.AuthSettings(
            issuer: TestAuth.issuerName, audience: TestAuth.audience, keySource: .jwksFile(file.path))
        let verifier = try await AccessTokenVerifier.load(settings, logger: Logger(label: "test"), now: { Self.start })
        let signer = JWTKeyCollection()
        await signer.add(rsa: privateKey, digestAlgorithm: .sha256, kid: "rsa-1")
        let token = try await signer.sign(Claims(now: Self.start), kid: "rsa-1")
        #expect(try await verifier.verify(token).userId == "c-1")
    }

    @Test("the new 401 codes reach the client through the middleware with WWW-Authenticate")
    func middlewareAnswers() async throws {
        let key = SigningKey(kid: "key-1")
        let verifier = await Self.verifier(for: key)
        var idToken = Claims(now: Self.start)
        idToken.tokenUse = "id"
        let cases: [(String, ErrorCode)] = [
            (try await key.sign(Claims(now: Self.start, nbf: Self.start + 600)), .tokenNotYetValid),
            (try await key.sign(idToken), .tokenTypeNotAccepted),
        ]
        let app = HTTPErrorAndAuthTests.application(verifier: verifier)
        try await app.test(.router) { client in
            for (token, code) in cases {
                let response = try await HTTPErrorAndAuthTests.get(client, "/v1/me", token: token)
                #expect(response.status == .unauthorized)
                #expect(response.headers[.wwwAuthenticate]?.hasPrefix("Bearer") == true)
                #expect(try HTTPErrorAndAuthTests.errorBody(response).error.code == code)
            }
        }
    }

    static let cognitoIssuer = "https://cognito-idp.ap-south-1.amazonaws.com/ap-south-1_pool"

    /// A JWK of an RSA public key with a modulus of `bits` bits (random: it only has to be refused).
    static func rsaJWK(kid: String, bits: Int) -> String {
        var modulus = (0..<(bits / 8)).map { _ in UInt8.random(in: 0...255) }
        modulus[0] |= 0x80
        modulus[modulus.count - 1] |= 1
        return #"{"kty":"RSA","alg":"RS256","use":"sig","kid":"\#(kid)","n":"\#(base64URL(Data(modulus)))","e":"AQAB"}"#
    }
}

/// The fixed "now" of the clock-skew cases.
private let fixedNow = JWTVerificationTests.start

/// Expects `token` to be refused with 401 and `code` (and a message containing `fragment`).
func expectRefused(
    _ token: String, by verifier: AccessTokenVerifier, code: ErrorCode, mentioning fragment: String? = nil,
    sourceLocation: SourceLocation = #_sourceLocation
) async {
    do {
        let identity = try await verifier.verify(token)
        Issue.record("accepted as \(identity), expected \(code)", sourceLocation: sourceLocation)
    } catch {
        #expect(error.status == .unauthorized, sourceLocation: sourceLocation)
        #expect(error.code == code, "\(error.message)", sourceLocation: sourceLocation)
        if let fragment {
            #expect(error.message.contains(fragment), "\(error.message)", sourceLocation: sourceLocation)
        }
    }
}

/// The claims of a test token: valid for an hour from `now` unless told otherwise.
struct Claims: JWTPayload {
    var sub = "c-1"
    var iss: String
    var aud: String? = TestAuth.audience
    var clientId: String?
    var exp: ExpirationClaim
    var nbf: NotBeforeClaim?
    var iat: IssuedAtClaim?
    var tokenUse: String?
    var role = "customer"

    init(now: Date, issuer: String = TestAuth.issuerName, exp: Date? = nil, nbf: Date? = nil, iat: Date? = nil) {
        self.iss = issuer
        self.exp = ExpirationClaim(value: exp ?? now + 3600)
        self.nbf = nbf.map(NotBeforeClaim.init(value:))
        self.iat = IssuedAtClaim(value: iat ?? now)
    }

    enum CodingKeys: String, CodingKey {
        case sub, iss, aud, exp, nbf, iat, role
        case clientId = "client_id"
        case tokenUse = "token_use"
    }

    func verify(using algorithm: some JWTAlgorithm) async throws {}
}

/// An ES256 key of the fake identity provider.
struct SigningKey: Sendable {
    var kid: String
    var privateKey = ES256PrivateKey()

    var jwk: String {
        let (x, y) = privateKey.publicKey.parameters!
        return #"{"kty":"EC","crv":"P-256","alg":"ES256","use":"sig","kid":"\#(kid)","x":"\#(x)","y":"\#(y)"}"#
    }

    func sign(_ claims: Claims) async throws -> String {
        let keys = JWTKeyCollection()
        await keys.add(ecdsa: privateKey, kid: JWKIdentifier(string: kid))
        return try await keys.sign(claims, kid: JWKIdentifier(string: kid))
    }
}

/// An identity provider's JWKS endpoint on 127.0.0.1 that serves what the test publishes and counts fetches.
final class FakeJWKSServer: Sendable {
    enum Failure: Sendable {
        case status(HTTPResponse.Status)
        case body(String)
    }

    private struct State {
        var keys: [SigningKey]
        var failure: Failure?
        var delay: Duration?
        var fetches = 0
    }

    let port = TestPorts.allocate()
    private let state: Locked<State>

    init(keys: [SigningKey]) { state = Locked(State(keys: keys)) }

    var url: URL { URL(string: "http://127.0.0.1:\(port)/.well-known/jwks.json")! }
    var fetches: Int { state.value.fetches }

    /// Serves `keys` from now on (after `delay` per request).
    func publish(_ keys: [SigningKey], answeringAfter delay: Duration? = nil) {
        state.withLock { $0 = State(keys: keys, failure: nil, delay: delay, fetches: $0.fetches) }
    }

    /// Answers every fetch with `failure` until the next ``publish(_:answeringAfter:)``.
    func fail(_ failure: Failure) { state.withLock { $0.failure = failure } }

    /// A verifier whose keys come from this server, as `JWT_JWKS_URL`.
    func verifier(
        now: @escaping @Sendable () -> Date, logger: Logger = Logger(label: "test")
    ) async throws -> AccessTokenVerifier {
        let settings = ServiceConfiguration.AuthSettings(
            issuer: TestAuth.issuerName, audience: TestAuth.audience, keySource: .jwksURL(url))
        return try await AccessTokenVerifier.load(settings, logger: logger, now: now)
    }

    /// Runs the server (and `services`, shut down first) for the duration of `body`.
    func run<Result: Sendable>(
        with services: [any Service] = [], _ body: @Sendable () async throws -> Result
    ) async throws -> Result {
        let router = Router()
        router.get("/.well-known/jwks.json") { _, _ -> Response in
            let (state, delay) = self.state.withLock { state in
                state.fetches += 1
                return (state, state.delay)
            }
            if let delay { try await Task.sleep(for: delay) }
            switch state.failure {
            case .status(let status):
                return Response(status: status)
            case .body(let text):
                return Response(status: .ok, body: .init(byteBuffer: ByteBuffer(string: text)))
            case nil:
                let json = #"{"keys":[\#(state.keys.map(\.jwk).joined(separator: ","))]}"#
                return Response(
                    status: .ok, headers: [.contentType: "application/json"],
                    body: .init(byteBuffer: ByteBuffer(string: json)))
            }
        }
        let app = Application(router: router, configuration: .init(address: .hostname("127.0.0.1", port: port)))
        return try await withRunningApplication(app, port: port, services: services, body)
    }
}

/// A logger whose messages (with their metadata) the test reads back.
final class CapturedLogs: Sendable {
    private let entries = Locked<[(Logger.Level, String)]>([])

    var logger: Logger {
        Logger(label: "test") { _ in Handler(logs: self) }
    }

    func messages(at level: Logger.Level) -> [String] {
        entries.value.filter { $0.0 == level }.map(\.1)
    }

    struct Handler: LogHandler {
        let logs: CapturedLogs
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level = .trace

        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }

        func log(event: LogEvent) {
            let metadata = (event.metadata ?? [:]).map { "\($0.key)=\($0.value)" }.sorted().joined(separator: " ")
            logs.entries.withLock { $0.append((event.level, "\(event.message) \(metadata)")) }
        }
    }
}

func temporaryDirectory() throws -> URL {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent(uniqueName("jwt"))
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    return directory
}

func openssl(_ arguments: [String]) throws {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
    process.arguments = arguments
    process.standardError = FileHandle.nullDevice
    try process.run()
    process.waitUntilExit()
    #expect(process.terminationStatus == 0, "openssl \(arguments.joined(separator: " "))")
}

func base64URL(_ data: Data) -> String {
    data.base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
        .replacingOccurrences(of: "=", with: "")
}

extension Sequence {
    /// `map` with an async transform, in order.
    func asyncMap<T>(_ transform: (Element) async throws -> T) async rethrows -> [T] {
        var results: [T] = []
        for element in self { results.append(try await transform(element)) }
        return results
    }
}

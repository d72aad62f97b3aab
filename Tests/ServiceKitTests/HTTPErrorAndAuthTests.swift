import Contracts
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import JWTKit
import Logging
import NIOCore
import ServiceKit
import TestSupport
import Testing

/// The shared HTTP edge: one JSON error shape, body validation, and bearer-token authentication.
@Suite("HTTP errors and authentication")
struct HTTPErrorAndAuthTests {
    struct Greeting: Codable {
        var name: String
        var count: Int
    }

    struct Unexpected: Error {}

    static func verifier() async throws -> AccessTokenVerifier {
        let keys = JWTKeyCollection()
        await keys.add(ecdsa: TestAuth.issuer.privateKey.publicKey)
        return AccessTokenVerifier(keys: keys, issuer: TestAuth.issuerName, audience: TestAuth.audience)
    }

    static func application(verifier: AccessTokenVerifier) -> some ApplicationProtocol {
        let router = Router(context: ServiceRequestContext.self)
        router.add(middleware: ErrorMiddleware())
        router.post("/open/greet") { request, context -> String in
            let greeting = try await request.decode(as: Greeting.self, context: context)
            return "hello \(greeting.name) x\(greeting.count)"
        }
        router.get("/open/crash") { _, _ -> String in throw Unexpected() }
        let api = router.group("v1").add(middleware: AuthenticationMiddleware(verifier: verifier))
        api.get("/me") { _, context -> String in
            let identity = try context.requireIdentity()
            return "\(identity.userId) \(identity.role.rawValue) \(identity.name ?? "-")"
        }
        api.get("/admin-only") { _, context -> String in
            _ = try context.requireIdentity(.admin)
            return "ok"
        }
        return Application(router: router)
    }

    static func errorBody(_ response: TestResponse) throws -> APIError.Body {
        #expect(response.headers[.contentType]?.hasPrefix("application/json") == true)
        return try JSONDecoder().decode(APIError.Body.self, from: Data(buffer: response.body))
    }

    static func get(_ client: some TestClientProtocol, _ path: String, token: String?) async throws -> TestResponse {
        var headers = HTTPFields()
        if let token { headers[.authorization] = "Bearer \(token)" }
        return try await client.execute(uri: path, method: .get, headers: headers)
    }

    @Test(
        "bad bodies get 400 with a code and a message naming the field; unknown routes 404; crashes 500 without details"
    )
    func errorShapes() async throws {
        let app = Self.application(verifier: try await Self.verifier())
        try await app.test(.router) { client in
            let cases: [(String, String?, HTTPResponse.Status, ErrorCode, String)] = [
                ("{\"name\":", "application/json", .badRequest, .invalidJSON, "not valid JSON"),
                ("", "application/json", .badRequest, .invalidJSON, "empty"),
                ("{\"name\":\"a\"}", "application/json", .badRequest, .validationFailed, "'count'"),
                (
                    "{\"name\":\"a\",\"count\":\"two\"}", "application/json", .badRequest, .validationFailed,
                    "'count' must be a integer"
                ),
                ("{\"name\":null,\"count\":1}", "application/json", .badRequest, .validationFailed, "'name'"),
                (
                    "name=a", "application/x-www-form-urlencoded", .unsupportedMediaType, .unsupportedMediaType,
                    "application/json"
                ),
            ]
            for (body, contentType, status, code, fragment) in cases {
                var headers = HTTPFields()
                headers[.contentType] = contentType
                let response = try await client.execute(
                    uri: "/open/greet", method: .post, headers: headers, body: ByteBuffer(string: body)
                )
                #expect(response.status == status, "\(body)")
                let error = try Self.errorBody(response)
                #expect(error.error.code == code, "\(body)")
                #expect(error.error.message.contains(fragment), "\(error.error.message)")
            }
            let ok = try await client.execute(
                uri: "/open/greet", method: .post, headers: [.contentType: "application/json"],
                body: ByteBuffer(string: #"{"name":"Asha","count":2}"#)
            )
            #expect(String(buffer: ok.body) == "hello Asha x2")

            let missing = try await client.execute(uri: "/no/such/route", method: .get)
            #expect(missing.status == .notFound)
            #expect(try Self.errorBody(missing).error.code == .notFound)

            let crash = try await client.execute(uri: "/open/crash", method: .get)
            #expect(crash.status == .internalServerError)
            let body = try Self.errorBody(crash)
            #expect(body.error.code == .internalError)
            #expect(!body.error.message.contains("Unexpected"))
        }
    }

    @Test("missing, malformed, expired, wrong-issuer, wrong-audience and wrong-signature tokens get 401")
    func rejectedTokens() async throws {
        let app = Self.application(verifier: try await Self.verifier())
        let issuer = TestAuth.issuer
        let stranger = TokenIssuer(
            privateKey: ES256PrivateKey(), issuer: TestAuth.issuerName, audience: TestAuth.audience)
        let cases: [(String?, ErrorCode)] = [
            (nil, .unauthorized),
            ("not-a-jwt", .invalidToken),
            (try await issuer.token(userId: "c1", role: .customer, expiresIn: .seconds(-60)), .tokenExpired),
            (try await issuer.token(userId: "c1", role: .customer, issuer: "https://evil.example"), .invalidToken),
            (try await issuer.token(userId: "c1", role: .customer, audience: "another-app"), .invalidToken),
            (try await stranger.token(userId: "c1", role: .customer), .invalidToken),
        ]
        try await app.test(.router) { client in
            for (token, code) in cases {
                let response = try await Self.get(client, "/v1/me", token: token)
                #expect(response.status == .unauthorized)
                #expect(response.headers[.wwwAuthenticate]?.hasPrefix("Bearer") == true)
                #expect(try Self.errorBody(response).error.code == code, "token \(token ?? "none")")
            }
        }
    }

    @Test("a valid token identifies the caller; the wrong role gets 403")
    func acceptedToken() async throws {
        let app = Self.application(verifier: try await Self.verifier())
        let token = try await TestAuth.token("c-42", .customer, name: "Asha")
        try await app.test(.router) { client in
            let me = try await Self.get(client, "/v1/me", token: token)
            #expect(me.status == .ok)
            #expect(String(buffer: me.body) == "c-42 customer Asha")
            let admin = try await Self.get(client, "/v1/admin-only", token: token)
            #expect(admin.status == .forbidden)
            #expect(try Self.errorBody(admin).error.code == .forbidden)
        }
    }

    @Test("Cognito-style tokens: role from cognito:groups, audience from client_id, RS256 from a JWKS file")
    func cognitoStyleRS256() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(uniqueName("rsa"))
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let keyFile = directory.appendingPathComponent("key.pem")
        let openssl = Process()
        openssl.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
        openssl.arguments = ["genrsa", "-out", keyFile.path, "2048"]
        openssl.standardError = FileHandle.nullDevice
        try openssl.run()
        openssl.waitUntilExit()
        let privateKey = try Insecure.RSA.PrivateKey(pem: try String(contentsOf: keyFile, encoding: .utf8))
        let signer = JWTKeyCollection()
        await signer.add(rsa: privateKey, digestAlgorithm: .sha256, kid: "cognito-key-1")

        let jwk = try privateKey.publicKey.jwk(kid: "cognito-key-1")
        let jwksFile = directory.appendingPathComponent("jwks.json")
        try Data(#"{"keys":[\#(jwk)]}"#.utf8).write(to: jwksFile)
        let settings = ServiceConfiguration.AuthSettings(
            issuer: "https://cognito-idp.ap-south-1.amazonaws.com/pool", audience: "app-client-id",
            keySource: .jwksFile(jwksFile.path)
        )
        let verifier = try await AccessTokenVerifier.load(settings, logger: Logger(label: "test"))

        struct CognitoClaims: JWTPayload {
            var sub: SubjectClaim
            var iss: IssuerClaim
            var exp: ExpirationClaim
            var client_id: String
            var token_use = "access"
            var groups: [String]
            enum CodingKeys: String, CodingKey {
                case sub, iss, exp, client_id, token_use
                case groups = "cognito:groups"
            }
            func verify(using algorithm: some JWTAlgorithm) throws {}
        }
        let token = try await signer.sign(
            CognitoClaims(
                sub: "rider-7", iss: "https://cognito-idp.ap-south-1.amazonaws.com/pool",
                exp: .init(value: Date().addingTimeInterval(600)), client_id: "app-client-id",
                groups: ["beta", "Rider"]
            ),
            kid: "cognito-key-1"
        )
        let identity = try await verifier.verify(token)
        #expect(identity == Identity(userId: "rider-7", role: .rider))
    }
}

extension Insecure.RSA.PublicKey {
    /// The key as a JWK (RFC 7517) with `kid`, for a test key set.
    func jwk(kid: String) throws -> String {
        let (modulus, exponent) = try getKeyPrimitives()
        func base64URL(_ data: Data) -> String {
            data.base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
                .replacingOccurrences(of: "=", with: "")
        }
        return
            #"{"kty":"RSA","alg":"RS256","use":"sig","kid":"\#(kid)","n":"\#(base64URL(modulus))","e":"\#(base64URL(exponent))"}"#
    }
}

import AsyncHTTPClient
import Contracts
import Foundation
import JWTKit
import Logging
import NIOCore
import NIOFoundationCompat

/// Verifies bearer tokens (RS256 or ES256) against the configured keys and claims: signature, `exp`, `iss`,
/// `aud` (or Cognito's `client_id`), `sub`, and a role from `role` or `cognito:groups`.
package struct AccessTokenVerifier: Sendable {
    private let keys: JWTKeyCollection
    package let issuer: String
    package let audience: String

    package init(keys: JWTKeyCollection, issuer: String, audience: String) {
        self.keys = keys
        self.issuer = issuer
        self.audience = audience
    }

    /// Loads the keys named by `settings`.
    /// - Throws: ``ConfigurationError`` when the key file or key set cannot be read or parsed.
    package static func load(
        _ settings: ServiceConfiguration.AuthSettings, httpClient: HTTPClient = .shared, logger: Logger
    ) async throws -> AccessTokenVerifier {
        let keys = JWTKeyCollection()
        switch settings.keySource {
        case .publicKeyFile(let path):
            let pem = try readKeyFile(path, variable: "JWT_PUBLIC_KEY_FILE")
            try await addPublicKey(pem: pem, to: keys, variable: "JWT_PUBLIC_KEY_FILE")
        case .jwksFile(let path):
            let json = try readKeyFile(path, variable: "JWT_JWKS_FILE")
            do {
                try await keys.add(jwksJSON: json)
            } catch {
                throw ConfigurationError(
                    variable: "JWT_JWKS_FILE", problem: "\(path) is not a JSON Web Key Set: \(error)")
            }
        case .jwksURL(let url):
            try await refreshKeySet(keys, from: url, httpClient: httpClient)
            logger.info("loaded the JSON Web Key Set", metadata: ["jwt.jwks_url": "\(url)"])
        }
        return AccessTokenVerifier(keys: keys, issuer: settings.issuer, audience: settings.audience)
    }

    /// Fetches a JSON Web Key Set and adds its keys (replacing keys with the same `kid`).
    package static func refreshKeySet(_ keys: JWTKeyCollection, from url: URL, httpClient: HTTPClient) async throws {
        var request = HTTPClientRequest(url: url.absoluteString)
        request.headers.add(name: "Accept", value: "application/json")
        let response = try await httpClient.execute(request, timeout: .seconds(10))
        guard response.status == .ok else {
            throw ConfigurationError(variable: "JWT_JWKS_URL", problem: "\(url) answered \(response.status)")
        }
        let body = try await response.body.collect(upTo: 1 << 20)
        do {
            try await keys.add(jwksJSON: String(buffer: body))
        } catch {
            throw ConfigurationError(variable: "JWT_JWKS_URL", problem: "\(url) served no valid key set: \(error)")
        }
    }

    /// Verifies `token` and returns whom it was issued to.
    /// - Throws: ``APIError`` 401 with code `TOKEN_EXPIRED` or `INVALID_TOKEN`.
    package func verify(_ token: String) async throws(APIError) -> Identity {
        try await verifyWithExpiry(token).identity
    }

    /// Verifies `token` like ``verify(_:)`` and also returns its `exp` (a long-lived connection ends then).
    package func verifyWithExpiry(_ token: String) async throws(APIError) -> (identity: Identity, expiresAt: Date) {
        let claims: AccessTokenClaims
        do {
            claims = try await keys.verify(token, as: AccessTokenClaims.self)
        } catch let error as TokenExpired {
            throw APIError(
                .unauthorized, code: .tokenExpired, message: "the token expired at \(ISO8601.format(error.expiredAt))")
        } catch {
            throw APIError(.unauthorized, code: .invalidToken, message: "the token is not valid: \(Self.reason(error))")
        }
        guard claims.iss?.value == issuer else {
            throw APIError(.unauthorized, code: .invalidToken, message: "the token was not issued by \(issuer)")
        }
        let audiences = (claims.aud?.value ?? []) + (claims.clientId.map { [$0] } ?? [])
        guard audiences.contains(audience) else {
            throw APIError(.unauthorized, code: .invalidToken, message: "the token is not meant for \(audience)")
        }
        guard let subject = claims.sub?.value, !subject.isEmpty else {
            throw APIError(.unauthorized, code: .invalidToken, message: "the token has no subject")
        }
        let candidates = (claims.role.map { [$0] } ?? []) + (claims.groups ?? [])
        guard let role = candidates.lazy.compactMap({ Role(rawValue: $0.lowercased()) }).first else {
            throw APIError(
                .unauthorized, code: .invalidToken,
                message:
                    "the token names no known role (role or cognito:groups: customer, rider, vendor, admin, technician)"
            )
        }
        return (Identity(userId: subject, role: role, name: claims.name), claims.exp.value)
    }

    private static func reason(_ error: any Error) -> String {
        if let error = error as? JWTError {
            return error.reason ?? "\(error.errorType)"
        }
        return "malformed"
    }

    private static func readKeyFile(_ path: String, variable: String) throws -> String {
        do {
            return try String(contentsOfFile: path, encoding: .utf8)
        } catch {
            throw ConfigurationError(variable: variable, problem: "cannot read \(path): \(error.localizedDescription)")
        }
    }

    private static func addPublicKey(pem: String, to keys: JWTKeyCollection, variable: String) async throws {
        if let key = try? Insecure.RSA.PublicKey(pem: pem) {
            await keys.add(rsa: key, digestAlgorithm: .sha256)
        } else if let key = try? ES256PublicKey(pem: pem) {
            await keys.add(ecdsa: key)
        } else {
            throw ConfigurationError(variable: variable, problem: "not a PEM RSA or P-256 public key")
        }
    }
}

/// Thrown from claim verification so an expired token gets its own error code.
struct TokenExpired: Error {
    var expiredAt: Date
}

/// The claims of an access token, Cognito-style.
struct AccessTokenClaims: JWTPayload {
    var sub: SubjectClaim?
    var iss: IssuerClaim?
    var aud: AudienceClaim?
    var exp: ExpirationClaim
    var clientId: String?
    var role: String?
    var groups: [String]?
    var name: String?

    enum CodingKeys: String, CodingKey {
        case sub, iss, aud, exp, role, name
        case clientId = "client_id"
        case groups = "cognito:groups"
    }

    func verify(using algorithm: some JWTAlgorithm) async throws {
        if exp.value <= Date() {
            throw TokenExpired(expiredAt: exp.value)
        }
    }
}

import AsyncHTTPClient
import Contracts
import Foundation
import JWTKit
import Logging
import NIOCore
import NIOFoundationCompat
import ServiceLifecycle
import Synchronization

/// Verifies bearer tokens (RS256 or ES256) against the configured keys and claims: signature (with the key the
/// header's `kid` names, for a key set), `exp`, `nbf` and `iat` (with ``leeway`` for clock skew), `iss`,
/// `token_use`, `aud` (or Cognito's `client_id`), `sub`, and a role from `role` or `cognito:groups`.
///
/// `token_use` rule: a token carrying `token_use` is accepted only when it is `access`; a token without it is
/// accepted unless the issuer is a Cognito user pool (`https://cognito-idp.REGION.amazonaws.com/POOL`), whose
/// access tokens always carry it. So Cognito ID tokens are refused with `TOKEN_TYPE_NOT_ACCEPTED`.
///
/// A token that passed is remembered (``VerifiedTokens``): the same token again skips the signature check inside the
/// times it was accepted for (`nbf`, `iat`, `exp`, with the leeway), while the key set it was verified with is held.
package struct AccessTokenVerifier: Sendable {
    private let keyStore: JWTKeyStore
    private let verified = VerifiedTokens()
    package let issuer: String
    package let audience: String
    /// How far the clocks of the issuer and this service may disagree: added to `exp`, taken from `nbf` and `iat`.
    package let leeway: Duration
    private let now: @Sendable () -> Date

    /// A verifier trusting the keys of `keys`, whatever `kid` a token names.
    package init(
        keys: JWTKeyCollection, issuer: String, audience: String, leeway: Duration = .seconds(60),
        now: @escaping @Sendable () -> Date = { Date() }
    ) {
        let keySet = VerificationKeySet(collection: keys, identifiers: nil)
        self.init(
            keyStore: JWTKeyStore(fixed: keySet, now: now), issuer: issuer, audience: audience, leeway: leeway, now: now
        )
    }

    private init(
        keyStore: JWTKeyStore, issuer: String, audience: String, leeway: Duration, now: @escaping @Sendable () -> Date
    ) {
        self.keyStore = keyStore
        self.issuer = issuer
        self.audience = audience
        self.leeway = leeway
        self.now = now
    }

    /// Loads the keys named by `settings`.
    /// - Parameter now: the clock tokens are checked against (tests set it).
    /// - Throws: ``ConfigurationError`` when the key file or key set cannot be read or holds no usable key (an RSA
    ///   key under 2048 bits is not usable).
    package static func load(
        _ settings: ServiceConfiguration.AuthSettings, httpClient: HTTPClient = .shared, logger: Logger,
        now: @escaping @Sendable () -> Date = { Date() }
    ) async throws -> AccessTokenVerifier {
        let store: JWTKeyStore
        switch settings.keySource {
        case .publicKeyFile(let path):
            let pem = try readKeyFile(path, variable: "JWT_PUBLIC_KEY_FILE")
            let keys = try await VerificationKeySet.publicKey(pem: pem, path: path, variable: "JWT_PUBLIC_KEY_FILE")
            store = JWTKeyStore(fixed: keys, now: now)
        case .jwksFile(let path):
            let json = try readKeyFile(path, variable: "JWT_JWKS_FILE")
            let keys = try await VerificationKeySet.keySet(
                json: Array(json.utf8), origin: path, variable: "JWT_JWKS_FILE", logger: logger)
            store = JWTKeyStore(fixed: keys, now: now)
        case .jwksURL(let url):
            let remote = JWTKeyStore.Remote(
                url: url, httpClient: httpClient, minimumRefetchInterval: settings.jwksMinimumRefetchInterval,
                logger: logger)
            store = try await JWTKeyStore(remote: remote, now: now)
        }
        return AccessTokenVerifier(
            keyStore: store, issuer: settings.issuer, audience: settings.audience, leeway: settings.leeway, now: now)
    }

    /// The service that fetches a JWKS URL's keys again every `interval`, for the service group; nil for keys from
    /// a file.
    package func keyRefreshJob(every interval: Duration) -> (any Service)? {
        keyStore.refreshJob(every: interval)
    }

    /// Verifies `token` and returns whom it was issued to.
    /// - Throws: ``APIError`` 401 with code `TOKEN_EXPIRED`, `TOKEN_NOT_YET_VALID`, `TOKEN_TYPE_NOT_ACCEPTED` or
    ///   `INVALID_TOKEN`.
    package func verify(_ token: String) async throws(APIError) -> Identity {
        try await verifyWithExpiry(token).identity
    }

    /// Verifies `token` like ``verify(_:)`` and also returns until when it is accepted: its `exp` plus the leeway,
    /// the moment ``verify(_:)`` starts refusing it (a long-lived connection ends then).
    package func verifyWithExpiry(_ token: String) async throws(APIError) -> (identity: Identity, expiresAt: Date) {
        let keysGeneration = keyStore.generation
        if let known = verified.accepted(token, keysGeneration: keysGeneration, now: now()) {
            return (known.identity, known.expiresAt)
        }
        let checked = try await verifyAnew(token)
        verified.remember(token, checked, keysGeneration: keysGeneration)
        return (checked.identity, checked.expiresAt)
    }

    /// Checks `token`'s signature and claims.
    private func verifyAnew(_ token: String) async throws(APIError) -> VerifiedTokens.Verified {
        guard let header = TokenHeader(token: token) else {
            throw APIError(.unauthorized, code: .invalidToken, message: "the token is not valid: malformed")
        }
        guard let keys = await keyStore.keys(for: header.kid) else {
            throw APIError(
                .unauthorized, code: .invalidToken,
                message: header.kid.map { "the token names a signing key (kid \($0)) the issuer does not publish" }
                    ?? "the token names no signing key (kid)"
            )
        }
        let claims: AccessTokenClaims
        do {
            claims = try await keys.collection.verify(token, as: AccessTokenClaims.self)
        } catch {
            throw APIError(.unauthorized, code: .invalidToken, message: "the token is not valid: \(Self.reason(error))")
        }
        try checkTimes(of: claims)
        guard claims.iss?.value == issuer else {
            throw APIError(.unauthorized, code: .invalidToken, message: "the token was not issued by \(issuer)")
        }
        if let tokenUse = claims.tokenUse ?? (isCognitoIssuer ? "" : nil), tokenUse != "access" {
            throw APIError(
                .unauthorized, code: .tokenTypeNotAccepted,
                message: tokenUse == "id"
                    ? "an ID token is not accepted; send the access token"
                    : "only access tokens (token_use access) are accepted"
            )
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
        return VerifiedTokens.Verified(
            identity: Identity(userId: subject, role: role, name: claims.name),
            validFrom: [claims.nbf?.value, claims.iat?.value].compactMap { $0 }.max()?
                .addingTimeInterval(-leeway.timeInterval),
            expiresAt: claims.exp.value.addingTimeInterval(leeway.timeInterval))
    }

    /// `exp` must be after now, `nbf` (if present) and `iat` (if present) not after now, each give or take ``leeway``;
    /// each a time a timestamp can name (``ISO8601/range``), or the token is invalid.
    private func checkTimes(of claims: AccessTokenClaims) throws(APIError) {
        let now = now()
        let leeway = leeway.timeInterval
        for time in [claims.exp.value, claims.nbf?.value, claims.iat?.value].compactMap({ $0 })
        where !ISO8601.range.contains(time) {
            throw APIError(
                .unauthorized, code: .invalidToken, message: "the token's exp, nbf or iat is out of range")
        }
        if claims.exp.value.addingTimeInterval(leeway) <= now {
            throw APIError(
                .unauthorized, code: .tokenExpired,
                message: "the token expired at \(ISO8601.format(claims.exp.value))")
        }
        if let notBefore = claims.nbf?.value, notBefore.addingTimeInterval(-leeway) > now {
            throw APIError(
                .unauthorized, code: .tokenNotYetValid,
                message: "the token is not valid before \(ISO8601.format(notBefore))")
        }
        if let issuedAt = claims.iat?.value, issuedAt.addingTimeInterval(-leeway) > now {
            throw APIError(
                .unauthorized, code: .tokenNotYetValid,
                message: "the token was issued in the future (\(ISO8601.format(issuedAt))); check the clocks")
        }
    }

    /// Whether ``issuer`` is a Cognito user pool, whose tokens must say `token_use`.
    private var isCognitoIssuer: Bool {
        guard let host = URL(string: issuer)?.host?.lowercased() else { return false }
        return host.hasPrefix("cognito-idp.") && host.hasSuffix(".amazonaws.com")
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
}

/// Tokens a verifier accepted lately, with what each was found to be: a client sends the same token with every
/// request until it renews it, and checking its signature was most of what authenticating a request cost (about 7%
/// of the order service's CPU during pickups). A token is accepted again only inside the times it was accepted for
/// (its `nbf` and `iat`, and its `exp`, give or take the leeway), byte for byte the same, and while the key set it was
/// verified with is held: a key set fetched since that differs from it forgets them all. At most ``capacity`` are kept, in two halves:
/// when the newer half is full it becomes the older and the older is dropped; a token found in the older half
/// moves to the newer, so tokens in use stay.
package final class VerifiedTokens: Sendable {
    /// What a verified token was found to be, and when it holds.
    package struct Verified: Sendable, Equatable {
        package var identity: Identity
        /// Its `nbf` or `iat`, whichever is later, less the leeway: before it the token is refused.
        package var validFrom: Date?
        /// Its `exp` plus the leeway: from then on the token is refused.
        package var expiresAt: Date

        package init(identity: Identity, validFrom: Date?, expiresAt: Date) {
            self.identity = identity
            self.validFrom = validFrom
            self.expiresAt = expiresAt
        }

        /// Whether the token holds at `now`.
        func holds(at now: Date) -> Bool { (validFrom.map { $0 <= now } ?? true) && now < expiresAt }
    }

    private struct Entry {
        var token: String
        var verified: Verified
    }

    private struct State {
        var keysGeneration = 0
        var newer: [String: Entry] = [:]
        var older: [String: Entry] = [:]

        /// Moves on to key set `generation` if it is newer (forgetting every token); whether it is the one held.
        mutating func isCurrent(_ generation: Int) -> Bool {
            if generation > keysGeneration {
                keysGeneration = generation
                newer = [:]
                older = [:]
            }
            return generation == keysGeneration
        }

        mutating func insert(_ entry: Entry) {
            newer[entry.token] = entry
            if newer.count >= VerifiedTokens.capacity / 2 {
                older = newer
                newer = [:]
            }
        }
    }

    /// The most tokens kept.
    package static let capacity = 10_000
    private let state = Mutex(State())

    package init() {}

    /// What `token` was found to be, if it was verified with key set `keysGeneration` and holds at `now`.
    package func accepted(_ token: String, keysGeneration: Int, now: Date) -> Verified? {
        state.withLock { state in
            guard state.isCurrent(keysGeneration) else { return nil }
            let entry: Entry
            if let found = state.newer[token] {
                entry = found
            } else if let found = state.older.removeValue(forKey: token) {
                entry = found
                state.insert(found)
            } else {
                return nil
            }
            // Strings compare equal by canonical equivalence; a token is its bytes.
            guard entry.token.utf8.elementsEqual(token.utf8), entry.verified.holds(at: now) else { return nil }
            return entry.verified
        }
    }

    /// Keeps `token`, found to be `verified` with key set `keysGeneration` (nothing if a newer one is held).
    package func remember(_ token: String, _ verified: Verified, keysGeneration: Int) {
        state.withLock { state in
            guard state.isCurrent(keysGeneration) else { return }
            state.insert(Entry(token: token, verified: verified))
        }
    }

    /// How many tokens are kept.
    package var count: Int { state.withLock { $0.newer.count + $0.older.count } }
}

/// The `kid` of a token's header, read before its signature is checked to pick the key.
private struct TokenHeader: Decodable {
    var kid: String?

    init?(token: String) {
        guard let encoded = token.split(separator: ".", omittingEmptySubsequences: false).first,
            let data = Data(base64URL: encoded),
            let header = try? JSONDecoder().decode(TokenHeader.self, from: data)
        else { return nil }
        self = header
    }
}

extension Data {
    /// Decodes unpadded base64url (RFC 4648 section 5).
    init?(base64URL text: some StringProtocol) {
        var base64 = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        base64 += String(repeating: "=", count: (4 - base64.count % 4) % 4)
        self.init(base64Encoded: base64)
    }
}

/// The claims of an access token, Cognito-style. Only decoded here: ``AccessTokenVerifier`` checks them against
/// its own clock.
struct AccessTokenClaims: JWTPayload {
    var sub: SubjectClaim?
    var iss: IssuerClaim?
    var aud: AudienceClaim?
    var exp: ExpirationClaim
    var nbf: NotBeforeClaim?
    var iat: IssuedAtClaim?
    var tokenUse: String?
    var clientId: String?
    var role: String?
    var groups: [String]?
    var name: String?

    enum CodingKeys: String, CodingKey {
        case sub, iss, aud, exp, nbf, iat, role, name
        case tokenUse = "token_use"
        case clientId = "client_id"
        case groups = "cognito:groups"
    }

    func verify(using algorithm: some JWTAlgorithm) async throws {}
}

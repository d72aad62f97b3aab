import Contracts
import Foundation
import JWTKit

/// Signs access tokens with an ES256 key: what `devtoken` and the tests use in place of the identity provider.
package struct TokenIssuer: Sendable {
    package let privateKey: ES256PrivateKey
    package let issuer: String
    package let audience: String

    package init(privateKey: ES256PrivateKey, issuer: String, audience: String) {
        self.privateKey = privateKey
        self.issuer = issuer
        self.audience = audience
    }

    /// The public key services verify with, as PEM (for `JWT_PUBLIC_KEY_FILE`).
    package var publicKeyPEM: String { privateKey.publicKey.pemRepresentation }

    /// A token for `userId` acting as `role`.
    /// - Parameters:
    ///   - expiresIn: lifetime; negative for an already expired token.
    ///   - issuer: overrides the issuer (tests of wrong-issuer tokens).
    package func token(
        userId: String, role: Role, name: String? = nil, expiresIn: Duration = .seconds(12 * 3600),
        issuer: String? = nil, audience: String? = nil
    ) async throws -> String {
        let keys = JWTKeyCollection()
        await keys.add(ecdsa: privateKey)
        let now = Date(timeIntervalSince1970: Date().timeIntervalSince1970.rounded(.down))
        let claims = IssuedClaims(
            sub: SubjectClaim(value: userId), iss: IssuerClaim(value: issuer ?? self.issuer),
            aud: AudienceClaim(value: [audience ?? self.audience]),
            exp: ExpirationClaim(value: now + expiresIn),
            iat: IssuedAtClaim(value: now), role: role.rawValue, name: name
        )
        return try await keys.sign(claims)
    }

    /// Loads the key pair from `directory` (`jwt-private.pem`), creating it (and `jwt-public.pem`) on first use.
    package static func loadOrCreate(directory: URL, issuer: String, audience: String) throws -> TokenIssuer {
        let privateURL = directory.appendingPathComponent("jwt-private.pem")
        let publicURL = directory.appendingPathComponent("jwt-public.pem")
        let key: ES256PrivateKey
        if FileManager.default.fileExists(atPath: privateURL.path) {
            key = try ES256PrivateKey(pem: try String(contentsOf: privateURL, encoding: .utf8))
        } else {
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            key = ES256PrivateKey()
            try Data(key.pemRepresentation.utf8).write(to: privateURL, options: .atomic)
            try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: privateURL.path)
        }
        try Data(key.publicKey.pemRepresentation.utf8).write(to: publicURL, options: .atomic)
        return TokenIssuer(privateKey: key, issuer: issuer, audience: audience)
    }
}

private struct IssuedClaims: JWTPayload {
    var sub: SubjectClaim
    var iss: IssuerClaim
    var aud: AudienceClaim
    var exp: ExpirationClaim
    var iat: IssuedAtClaim
    var role: String
    var name: String?

    func verify(using algorithm: some JWTAlgorithm) async throws {}
}

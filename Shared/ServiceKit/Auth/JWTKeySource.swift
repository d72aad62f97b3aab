import Foundation

/// Where the keys that sign access tokens come from.
package enum JWTKeySource: Sendable, Equatable {
    /// `JWT_PUBLIC_KEY_FILE`: one PEM public key, RSA (RS256) or EC P-256 (ES256).
    case publicKeyFile(String)
    /// `JWT_JWKS_FILE`: a JSON Web Key Set on disk.
    case jwksFile(String)
    /// `JWT_JWKS_URL`: a JSON Web Key Set fetched at start-up, then every `JWT_JWKS_REFRESH_SECONDS` and when a
    /// token names an unknown `kid` (see ``JWTKeyStore``), e.g. Cognito's
    /// `https://cognito-idp.REGION.amazonaws.com/POOL/.well-known/jwks.json`.
    case jwksURL(URL)

    init(environment: ServiceEnvironment) throws(ConfigurationError) {
        let file = environment.optional("JWT_PUBLIC_KEY_FILE")
        let jwksFile = environment.optional("JWT_JWKS_FILE")
        let jwksURL = try environment.url("JWT_JWKS_URL", meaning: "where the JSON Web Key Set is served")
        let given = [file != nil, jwksFile != nil, jwksURL != nil].filter { $0 }.count
        guard given == 1 else {
            throw ConfigurationError(
                variable: "JWT_PUBLIC_KEY_FILE",
                problem: given == 0
                    ? "required: set one of JWT_PUBLIC_KEY_FILE, JWT_JWKS_FILE or JWT_JWKS_URL to verify tokens"
                    : "set only one of JWT_PUBLIC_KEY_FILE, JWT_JWKS_FILE and JWT_JWKS_URL"
            )
        }
        if let file {
            self = .publicKeyFile(file)
        } else if let jwksFile {
            self = .jwksFile(jwksFile)
        } else {
            self = .jwksURL(jwksURL!)
        }
    }
}

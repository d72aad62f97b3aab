import Crypto
import Foundation
import JWTKit
import Logging

/// The keys tokens are verified with at one moment, replaced whole when a JSON Web Key Set is fetched again.
///
/// RSA keys under 2048 bits are refused: a PEM file holding one is a configuration error; in a key set such a key
/// (like any other key that cannot be used: no `kid`, an unsupported type) is skipped with a warning naming its
/// `kid`, and the set is refused only when no usable key remains.
struct VerificationKeySet: Sendable {
    /// The smallest RSA modulus accepted, in bits.
    static let minimumRSABits = 2048

    let collection: JWTKeyCollection
    /// The `kid`s of a key set; nil for a single key, which verifies tokens whatever `kid` they name.
    let identifiers: Set<String>?

    /// Whether a token naming `kid` (or none) is verified with these keys rather than refused unseen.
    func holds(_ kid: String?) -> Bool {
        guard let identifiers else { return true }
        return kid.map(identifiers.contains) ?? false
    }

    /// One PEM public key, RSA (RS256, at least 2048 bits) or EC P-256 (ES256), read from `path`.
    static func publicKey(pem: String, path: String, variable: String) async throws(ConfigurationError) -> Self {
        let collection = JWTKeyCollection()
        if let key = try? ES256PublicKey(pem: pem) {
            await collection.add(ecdsa: key)
        } else {
            do {
                await collection.add(rsa: try Insecure.RSA.PublicKey(pem: pem), digestAlgorithm: .sha256)
            } catch CryptoKitError.incorrectParameterSize {
                throw ConfigurationError(
                    variable: variable,
                    problem:
                        "\(path) is an RSA key shorter than \(minimumRSABits) bits; use a \(minimumRSABits)-bit or longer key"
                )
            } catch {
                throw ConfigurationError(variable: variable, problem: "\(path) is not a PEM RSA or P-256 public key")
            }
        }
        return VerificationKeySet(collection: collection, identifiers: nil)
    }

    /// The usable keys of the JSON Web Key Set `json` read from `origin` (a path or URL, for messages).
    /// - Throws: ``ConfigurationError`` naming `variable` when `json` is no key set or holds no usable key.
    static func keySet(
        json: some DataProtocol, origin: String, variable: String, logger: Logger
    ) async throws(ConfigurationError) -> Self {
        let entries: [KeySetEntry]
        do {
            entries = try JSONDecoder().decode(KeySetDocument.self, from: Data(json)).keys
        } catch {
            throw ConfigurationError(variable: variable, problem: "\(origin) is not a JSON Web Key Set: \(error)")
        }
        let collection = JWTKeyCollection()
        var identifiers: Set<String> = []
        var skipped: [String] = []
        for entry in entries {
            let problem: String?
            switch (entry.kid, entry.key) {
            case (nil, _):
                problem = "it has no kid"
            case (_, .failure(let error)):
                problem = "it is not a usable JSON Web Key (\(error))"
            case (_, .success(let jwk)):
                if let bits = entry.rsaModulusBits, bits < minimumRSABits {
                    problem = "it is an RSA key of \(bits) bits; at least \(minimumRSABits) are required"
                } else {
                    do {
                        try await collection.add(jwk: jwk)
                        problem = nil
                    } catch {
                        problem = "it cannot verify tokens (\(error))"
                    }
                }
            }
            let kid = entry.kid ?? "(none)"
            if let problem {
                logger.warning(
                    "skipping a key of the JSON Web Key Set: \(problem)",
                    metadata: ["jwt.kid": "\(kid)", "jwt.jwks": "\(origin)"]
                )
                skipped.append("\(kid): \(problem)")
            } else {
                identifiers.insert(kid)
            }
        }
        guard !identifiers.isEmpty else {
            throw ConfigurationError(
                variable: variable,
                problem: "\(origin) holds no usable key"
                    + (skipped.isEmpty ? "" : " (skipped \(skipped.joined(separator: "; ")))")
            )
        }
        return VerificationKeySet(collection: collection, identifiers: identifiers)
    }
}

/// `{"keys":[...]}`, each key decoded on its own so one bad key does not spoil the others.
private struct KeySetDocument: Decodable {
    var keys: [KeySetEntry]
}

private struct KeySetEntry: Decodable {
    var kid: String?
    var rsaModulusBits: Int?
    var key: Result<JWK, any Error>

    private struct Summary: Decodable {
        var kid: String?
        var kty: String?
        var n: String?
    }

    init(from decoder: any Decoder) throws {
        let summary = try Summary(from: decoder)
        kid = summary.kid.flatMap { $0.isEmpty ? nil : $0 }
        rsaModulusBits = summary.kty == "RSA" ? summary.n.flatMap(Self.bitLength(base64URL:)) : nil
        key = Result { try JWK(from: decoder) }
    }

    /// The bit length of a big-endian unsigned integer written in base64url, e.g. an RSA modulus.
    static func bitLength(base64URL text: String) -> Int? {
        guard let bytes = Data(base64URL: text) else { return nil }
        guard let first = bytes.firstIndex(where: { $0 != 0 }) else { return 0 }
        return (bytes.endIndex - first - 1) * 8 + (8 - bytes[first].leadingZeroBitCount)
    }
}

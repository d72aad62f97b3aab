import ArgumentParser
import Contracts
import Foundation
import ServiceKit

/// Prints a JWT that services started by `make run` accept.
@main
struct DevToken: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "devtoken",
        abstract: "Mint a development access token (ES256) for the locally running services.",
        discussion: """
            The key pair is created on first use in --key-dir (kept out of git); make run points the services'
            JWT_PUBLIC_KEY_FILE at its public half. Use the token as 'Authorization: Bearer <token>' or as the
            Socket.IO handshake auth {"token": "<token>"}.
            """
    )

    @Option(help: "The user id (the token's sub).")
    var sub: String?

    @Option(help: "customer, rider, vendor, admin or technician.")
    var role: String?

    @Option(help: "The display name (shown to the other party, e.g. in chat).")
    var name: String?

    @Option(help: "Lifetime in seconds.")
    var ttl: Int = 12 * 3600

    @Option(help: "Where the dev key pair lives.")
    var keyDir: String = ".local/dev-keys"

    @Option(help: "The iss claim; must match the services' JWT_ISSUER.")
    var issuer: String = "https://auth.delivery.local"

    @Option(help: "The aud claim; must match the services' JWT_AUDIENCE.")
    var audience: String = "delivery-platform"

    @Flag(help: "Only create the key pair if missing and print the public key's path.")
    var initKeys = false

    func run() async throws {
        let directory = URL(fileURLWithPath: keyDir)
        let issuer = try TokenIssuer.loadOrCreate(directory: directory, issuer: self.issuer, audience: audience)
        if initKeys {
            print(directory.appendingPathComponent("jwt-public.pem").path)
            return
        }
        guard let sub, !sub.isEmpty else { throw ValidationError("--sub is required") }
        guard let roleText = role, let role = Role(rawValue: roleText) else {
            throw ValidationError("--role must be one of \(Role.allCases.map(\.rawValue).joined(separator: ", "))")
        }
        guard ttl > 0 else { throw ValidationError("--ttl must be positive") }
        print(try await issuer.token(userId: sub, role: role, name: name, expiresIn: .seconds(ttl)))
    }
}

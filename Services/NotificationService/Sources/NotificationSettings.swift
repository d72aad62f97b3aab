import AsyncHTTPClient
import Foundation
import Logging
import NIOSSL
import ServiceKit
import Synchronization

/// Notification's settings, from the environment.
package struct NotificationSettings: Sendable {
    /// `PUSH_LOG_PROVIDER` (false): pushes of a platform without credentials are only logged (token and text
    /// redacted). For local runs; without it, a platform without credentials stops the start-up.
    package var allowsLogProvider: Bool
    /// `FCM_SERVICE_ACCOUNT_FILE` (a Google service-account JSON); without it Android pushes need the log
    /// provider. `FCM_BASE_URL` (default https://fcm.googleapis.com) and `FCM_TOKEN_URL` (default: the account's
    /// `token_uri`).
    package var fcmServiceAccountFile: String?
    package var fcmBaseURL: String
    package var fcmTokenURL: String?
    /// `APNS_KEY_FILE` (the .p8 key), `APNS_KEY_ID`, `APNS_TEAM_ID`, `APNS_TOPIC` (the app's bundle id); without
    /// them iOS pushes need the log provider. `APNS_BASE_URL` (default https://api.push.apple.com),
    /// `APNS_CA_FILE` (a PEM of extra trusted roots, e.g. a corporate proxy's), `APNS_TOKEN_REFRESH_SECONDS`
    /// (3000; Apple refuses tokens over an hour old).
    package var apnsKeyFile: String?
    package var apnsKeyId: String?
    package var apnsTeamId: String?
    package var apnsTopic: String?
    package var apnsBaseURL: String
    package var apnsCAFile: String?
    package var apnsTokenRefresh: Duration
    /// `PUSH_TIMEOUT_MS` (10000) per provider call; `PUSH_MAX_ATTEMPTS` (5) per device; retries after
    /// `PUSH_RETRY_INITIAL_MS` (1000) doubling with jitter up to `PUSH_RETRY_MAX_SECONDS` (300), or the
    /// provider's Retry-After; `PUSH_CONCURRENCY` (64) provider calls at once; `PUSH_TICK_MS` (250) at least
    /// between looks for due retries, `PUSH_IDLE_TICK_MS` (5000) at most while none is due sooner; up to
    /// `PUSH_ACCEPT_BATCH` (128) requests accepted in one transaction.
    package var timeout: Duration
    package var maximumAttempts: Int
    package var retryInitial: Duration
    package var retryMaximum: Duration
    package var concurrency: Int
    package var tick: Duration
    package var idleTick: Duration
    package var acceptBatch: Int
    /// `MAX_DEVICES_PER_USER` (10): devices kept per user; registering another drops the least recently registered.
    package var maximumDevicesPerUser: Int

    package init(environment: ServiceEnvironment) throws(ConfigurationError) {
        allowsLogProvider = try environment.bool("PUSH_LOG_PROVIDER", default: false)
        fcmServiceAccountFile = environment.optional("FCM_SERVICE_ACCOUNT_FILE")
        fcmBaseURL = environment.optional("FCM_BASE_URL") ?? "https://fcm.googleapis.com"
        fcmTokenURL = environment.optional("FCM_TOKEN_URL")
        apnsKeyFile = environment.optional("APNS_KEY_FILE")
        apnsKeyId = environment.optional("APNS_KEY_ID")
        apnsTeamId = environment.optional("APNS_TEAM_ID")
        apnsTopic = environment.optional("APNS_TOPIC")
        apnsBaseURL = environment.optional("APNS_BASE_URL") ?? "https://api.push.apple.com"
        apnsCAFile = environment.optional("APNS_CA_FILE")
        apnsTokenRefresh = try environment.seconds("APNS_TOKEN_REFRESH_SECONDS", default: .seconds(3000), in: 60...3500)
        timeout = try environment.milliseconds("PUSH_TIMEOUT_MS", default: .seconds(10), in: 100...120_000)
        maximumAttempts = try environment.int("PUSH_MAX_ATTEMPTS", default: 5, in: 1...50)
        retryInitial = try environment.milliseconds("PUSH_RETRY_INITIAL_MS", default: .seconds(1), in: 10...3_600_000)
        retryMaximum = try environment.seconds("PUSH_RETRY_MAX_SECONDS", default: .seconds(300), in: 1...86_400)
        concurrency = try environment.int("PUSH_CONCURRENCY", default: 64, in: 1...10_000)
        tick = try environment.milliseconds("PUSH_TICK_MS", default: .milliseconds(250), in: 10...60_000)
        idleTick = try environment.milliseconds("PUSH_IDLE_TICK_MS", default: .seconds(5), in: 10...600_000)
        acceptBatch = try environment.int("PUSH_ACCEPT_BATCH", default: 128, in: 1...1_000)
        maximumDevicesPerUser = try environment.int(
            "MAX_DEVICES_PER_USER", default: DeviceRules.defaultMaximumDevicesPerUser, in: 1...100)
        if apnsKeyFile != nil, apnsKeyId == nil || apnsTeamId == nil || apnsTopic == nil {
            throw ConfigurationError(
                variable: "APNS_KEY_ID", problem: "APNS_KEY_FILE needs APNS_KEY_ID, APNS_TEAM_ID and APNS_TOPIC")
        }
        if !allowsLogProvider {
            let logOnly = "or set PUSH_LOG_PROVIDER=true to only log pushes (local runs)"
            if fcmServiceAccountFile == nil {
                throw ConfigurationError(
                    variable: "FCM_SERVICE_ACCOUNT_FILE", problem: "required to push to Android devices, \(logOnly)")
            }
            if apnsKeyFile == nil {
                throw ConfigurationError(
                    variable: "APNS_KEY_FILE", problem: "required to push to iOS devices, \(logOnly)")
            }
        }
    }

    /// The providers by platform (`android`, `ios`), from the credentials configured; the log provider otherwise
    /// (only when `PUSH_LOG_PROVIDER` allows it: ``init(environment:)`` checked).
    package func providers(logger: Logger) async throws -> [DevicePlatform: any PushProvider] {
        var providers: [DevicePlatform: any PushProvider] = [
            .android: LogPushProvider(platform: "android", logger: logger),
            .ios: LogPushProvider(platform: "ios", logger: logger),
        ]
        if let file = fcmServiceAccountFile {
            let account: FCMProvider.ServiceAccount
            do {
                account = try JSONDecoder().decode(
                    FCMProvider.ServiceAccount.self, from: Data(contentsOf: URL(fileURLWithPath: file)))
            } catch {
                throw ConfigurationError(
                    variable: "FCM_SERVICE_ACCOUNT_FILE", problem: "\(file) is not a service-account JSON: \(error)")
            }
            providers[.android] = try await FCMProvider(
                account: account, baseURL: fcmBaseURL, tokenURL: fcmTokenURL,
                client: Self.client(trusting: nil, connections: concurrency),
                timeout: timeout)
        }
        if let file = apnsKeyFile, let keyId = apnsKeyId, let teamId = apnsTeamId, let topic = apnsTopic {
            guard let pem = try? String(contentsOfFile: file, encoding: .utf8) else {
                throw ConfigurationError(variable: "APNS_KEY_FILE", problem: "cannot read \(file)")
            }
            providers[.ios] = try await APNsProvider(
                privateKeyPEM: pem, keyId: keyId, teamId: teamId, topic: topic, baseURL: apnsBaseURL,
                client: Self.client(trusting: apnsCAFile, connections: concurrency), timeout: timeout,
                refreshAfter: apnsTokenRefresh
            )
        }
        return providers
    }

    /// The providers' HTTP clients, one per CA file and connection limit for the life of the process (AsyncHTTPClient
    /// clients must be shut down before they go; these never go).
    private static let clients = Mutex<[String: HTTPClient]>([:])

    /// A client like `HTTPClient.shared` that opens up to `connections` HTTP/1.1 connections to a provider (the
    /// shared one opens 8, which held `PUSH_CONCURRENCY` calls to an HTTP/1.1 endpoint to 8 at once; HTTP/2
    /// multiplexes them on one), trusting `caFile` too when given.
    static func client(trusting caFile: String?, connections: Int) -> HTTPClient {
        clients.withLock { clients in
            let key = "\(connections) \(caFile ?? "")"
            if let client = clients[key] { return client }
            var configuration = HTTPClient.Configuration.singletonConfiguration
            if let caFile {
                var tls = TLSConfiguration.makeClientConfiguration()
                tls.trustRoots = .file(caFile)
                configuration.tlsConfiguration = tls
            }
            configuration.connectionPool.concurrentHTTP1ConnectionsPerHostSoftLimit = connections
            let client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
            clients[key] = client
            return client
        }
    }
}

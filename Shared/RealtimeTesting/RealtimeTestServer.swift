import Hummingbird
import Logging
import Realtime
import ServiceLifecycle

/// Serves `realtime` on 127.0.0.1, at a port the system picks, for the duration of `body` (which gets the port),
/// from the moment it follows its store (takes handshakes); then shuts it down gracefully.
public func withRealtimeServer<Result: Sendable>(
    _ realtime: RealtimeServer, logger: Logger = Logger(label: "realtime-test-server"),
    _ body: @Sendable (_ port: Int) async throws -> Result
) async throws -> Result {
    let router = Router()
    realtime.addRoutes(to: router)
    let ports = AsyncQueue<Int>()
    let app = Application(
        router: router, server: RealtimeServerBuilder.http1WithWebSockets([realtime.engine]),
        configuration: .init(address: .hostname("127.0.0.1", port: 0)),
        onServerRunning: { channel in ports.push(channel.localAddress?.port ?? 0) }, logger: logger)
    let services = ServiceGroup(
        configuration: .init(services: [app, realtime], gracefulShutdownSignals: [], logger: logger))
    return try await withThrowingTaskGroup(of: Void.self) { group in
        group.addTask { try await services.run() }
        let outcome: Swift.Result<Result, any Error>
        do {
            let limit = Duration.seconds(10)
            guard let port = try await ports.next(timeout: limit) else {
                throw TimedOut(what: "the server listening", timeout: limit)
            }
            try await eventually(timeout: limit, interval: .milliseconds(5), "the realtime server following its store")
            {
                realtime.isFollowing
            }
            outcome = .success(try await body(port))
        } catch {
            outcome = .failure(error)
        }
        await services.triggerGracefulShutdown()
        try await group.waitForAll()
        return try outcome.get()
    }
}

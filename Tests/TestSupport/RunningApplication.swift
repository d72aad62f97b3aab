import Foundation
import Hummingbird
import Logging
import Realtime
import RealtimeTesting
import ServiceLifecycle
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// Fixed ports for servers tests start in-process (19200-19999), one per call, so parallel tests never share.
package enum TestPorts {
    private static let next = Atomic<Int>(19200)
    package static func allocate() -> Int { next.add(1, ordering: .relaxed).oldValue }
}

/// Runs `app` (listening on `port`) and `services` (shut down before it) for the duration of `body`, then shuts
/// everything down gracefully.
package func withRunningApplication<App: ApplicationProtocol, Result: Sendable>(
    _ app: App, port: Int, services: [any Service] = [], _ body: @Sendable () async throws -> Result
) async throws -> Result {
    try await withRunningServices([app] + services, port: port, body)
}

/// Runs `services` (one of them listening on `port`, if given) for the duration of `body`, then shuts them down in
/// reverse order. A shutdown that takes longer than `shutdownLimit` dumps every thread's backtrace to stderr and
/// fails with ``ShutdownOverran`` (the services are then cancelled), rather than hang the test run.
package func withRunningServices<Result: Sendable>(
    _ services: [any Service], port: Int? = nil, shutdownLimit: Duration = .seconds(30),
    _ body: @Sendable () async throws -> Result
) async throws -> Result {
    try await withThrowingTaskGroup(of: Void.self) { group in
        let serviceGroup = ServiceGroup(
            configuration: .init(services: services, gracefulShutdownSignals: [], logger: Logger(label: "test-app"))
        )
        group.addTask { try await serviceGroup.run() }
        if let port {
            try await eventually(timeout: .seconds(10), "port \(port) listening") { isListening(port: port) }
        }
        // Realtime servers take handshakes once they follow their store.
        let realtime = services.compactMap { $0 as? RealtimeServer }
        try await eventually(timeout: .seconds(10), "the realtime servers following their stores") {
            realtime.allSatisfy(\.isFollowing)
        }
        let outcome: Swift.Result<Result, any Error>
        do {
            outcome = .success(try await body())
        } catch {
            outcome = .failure(error)
        }
        await serviceGroup.triggerGracefulShutdown()
        group.addTask {
            try await Task.sleep(for: shutdownLimit)
            FileHandle.standardError.write(Data(await threadBacktraces().utf8))
            throw ShutdownOverran(limit: shutdownLimit)
        }
        do {
            // The first task to end is the service group (shut down) or the deadline.
            try await group.next()
            group.cancelAll()
        } catch {
            group.cancelAll()
            if case .success = outcome { throw error }
        }
        return try outcome.get()
    }
}

/// Whether something accepts TCP connections on 127.0.0.1:`port`.
package func isListening(port: Int) -> Bool {
    let socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard socket >= 0 else { return false }
    defer { close(socket) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = in_port_t(UInt16(port).bigEndian)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    return withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            connect(socket, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
        }
    }
}

import Foundation
import RealtimeTesting

#if canImport(Glibc)
    import Glibc
#endif

/// A Tansu broker of a test's own, on a fixed port, that the test can stop and start again (its data is in
/// memory, so a restart starts empty, like a cluster that lost its state).
package final class TansuBroker: @unchecked Sendable {
    // @unchecked: `process` is only touched by the test that owns the broker, sequentially.
    package let port: Int
    private var process: ChildProcess?

    package var address: String { "127.0.0.1:\(port)" }

    /// - Parameter port: from 19100-19199, the range `make test` leaves to tests.
    package init(port: Int) { self.port = port }

    package func start() async throws {
        self.process = try ChildProcess(
            executable: try TestInfrastructure.tansuBinary(),
            arguments: [
                "broker", "--listener-url", "tcp://127.0.0.1:\(port)", "--advertised-listener-url",
                "tcp://127.0.0.1:\(port)",
            ]
        )
        try await eventually(timeout: .seconds(10), "Tansu listening on port \(port)") { isListening(port: port) }
    }

    package func stop() async {
        guard let process else { return }
        kill(process.pid, SIGTERM)
        _ = await process.exitStatus()
        self.process = nil
    }

    deinit { process?.stop(signal: SIGKILL) }
}

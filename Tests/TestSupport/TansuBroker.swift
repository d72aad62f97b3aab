import Foundation

/// A Tansu broker of a test's own, on a fixed port, that the test can stop and start again (its data is in
/// memory, so a restart starts empty, like a cluster that lost its state).
package final class TansuBroker: @unchecked Sendable {
    // @unchecked: `process` is only touched by the test that owns the broker, sequentially.
    package let port: Int
    private var process: ChildProcess?

    package var address: String { "127.0.0.1:\(port)" }

    /// - Parameter port: from 19100-19199, the range `make test` leaves to tests.
    package init(port: Int) { self.port = port }

    package func start() throws {
        self.process = try ChildProcess(
            executable: try TestInfrastructure.tansuBinary(),
            arguments: [
                "broker", "--listener-url", "tcp://127.0.0.1:\(port)", "--advertised-listener-url",
                "tcp://127.0.0.1:\(port)",
            ]
        )
        let deadline = Date().addingTimeInterval(10)
        while !Self.accepts(port: port) {
            guard Date() < deadline else { throw TimedOut(what: "Tansu on port \(port)", timeout: .seconds(10)) }
            Thread.sleep(forTimeInterval: 0.05)
        }
    }

    package func stop() {
        process?.stop()
        process = nil
    }

    deinit { stop() }

    private static func accepts(port: Int) -> Bool {
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
}

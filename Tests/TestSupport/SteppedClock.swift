import Foundation
import Hummingbird
import RealtimeTesting
import ServiceKit
import ServiceLifecycle
import Synchronization

/// A clock for a service under test that runs with the machine's clock and jumps forward when told, so a
/// deadline passes at once instead of after a wait. (ServiceKit's ``ManualClock`` stands still between steps;
/// a running service also needs time to go on for what the test does not step, such as fixes recorded now.)
package final class SteppedClock: Sendable {
    private let offset = Mutex(Duration.zero)

    package init() {}

    /// Reads this clock: the machine's time plus every step so far.
    package var now: Now { Now { Date() + self.offset.withLock { $0 } } }

    /// Moves the clock `duration` forward.
    package func advance(by duration: Duration) { offset.withLock { $0 += duration } }

    /// Serves `POST /advance?ms=N` on 127.0.0.1, so a python scenario steps the clock of the service it drives
    /// (`scenario_kit.advance_clock`); returns the base URL.
    package func serveControl() async throws -> String {
        let port = TestPorts.allocate()
        let router = Router()
        router.post("advance") { request, _ -> HTTPResponse.Status in
            guard let text = request.uri.queryParameters.get("ms"), let ms = Int64(text), ms >= 0 else {
                return .badRequest
            }
            self.advance(by: .milliseconds(ms))
            return .noContent
        }
        let app = Application(router: router, configuration: .init(address: .hostname("127.0.0.1", port: port)))
        let group = ServiceGroup(configuration: .init(services: [app], gracefulShutdownSignals: [], logger: app.logger))
        Task { try await group.run() }
        try await eventually(timeout: .seconds(10), "the clock control listening") { isListening(port: port) }
        return "http://127.0.0.1:\(port)"
    }
}

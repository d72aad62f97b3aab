import Contracts
import Foundation
import Hummingbird

/// A named dependency check for `/ready`. A required check that throws makes the instance not ready (503); an
/// advisory one makes it "degraded" (still 200: it serves, but an operator has something to look at).
package struct ReadinessCheck: Sendable {
    package var name: String
    package var isAdvisory: Bool
    package var check: @Sendable () async throws -> Void
    package init(name: String, isAdvisory: Bool = false, check: @escaping @Sendable () async throws -> Void) {
        self.name = name
        self.isAdvisory = isAdvisory
        self.check = check
    }
}

/// `/health` (200 while the process runs), `/ready` (200 while every required dependency answers, else 503 naming
/// what is down; "degraded" when an advisory check fails) and `/metrics` (Prometheus text).
package enum HealthRoutes {
    package struct ReadyBody: Codable, Sendable, Equatable {
        /// `ready`, `degraded` or `not_ready`.
        package var status: String
        /// `up`, `down` or `degraded` per check.
        package var checks: [String: String]
        package var error: APIError.Body.Detail?
    }

    package static func add(
        to router: Router<some RequestContext>, service: String, checks: [ReadinessCheck],
        timeout: Duration = .seconds(2)
    ) {
        router.get("/health") { _, _ in
            APIError.response(status: .ok, body: ["status": "ok", "service": service])
        }
        router.get("/ready") { _, context in
            let results = await withTaskGroup(of: (ReadinessCheck, (any Error)?).self) { group in
                for check in checks {
                    group.addTask {
                        do {
                            try await withTimeout(timeout) { try await check.check() }
                            return (check, nil)
                        } catch {
                            return (check, error)
                        }
                    }
                }
                var results: [(ReadinessCheck, (any Error)?)] = []
                for await result in group { results.append(result) }
                return results.sorted { $0.0.name < $1.0.name }
            }
            var statuses: [String: String] = [:]
            var down: [String] = []
            var degraded: [String] = []
            for (check, failure) in results {
                guard let failure else {
                    statuses[check.name] = "up"
                    continue
                }
                if check.isAdvisory {
                    statuses[check.name] = "degraded"
                    degraded.append("\(check.name): \(failure)")
                } else {
                    statuses[check.name] = "down"
                    down.append(check.name)
                    context.logger.warning(
                        "readiness check failed", metadata: ["check": "\(check.name)", "error": "\(failure)"])
                }
            }
            if !down.isEmpty {
                let body = ReadyBody(
                    status: "not_ready", checks: statuses,
                    error: .init(code: .notReady, message: "down: " + down.joined(separator: ", "), details: nil)
                )
                return APIError.response(status: .serviceUnavailable, body: body)
            }
            if !degraded.isEmpty {
                let body = ReadyBody(
                    status: "degraded", checks: statuses,
                    error: .init(code: .degraded, message: degraded.joined(separator: "; "), details: nil)
                )
                return APIError.response(status: .ok, body: body)
            }
            return APIError.response(status: .ok, body: ReadyBody(status: "ready", checks: statuses, error: nil))
        }
        router.get("/metrics") { _, _ in
            let text = ServiceMetrics.exposition()
            return Response(
                status: .ok, headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8"],
                body: .init(byteBuffer: ByteBuffer(string: text))
            )
        }
    }
}

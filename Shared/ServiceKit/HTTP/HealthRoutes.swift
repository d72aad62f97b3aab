import Contracts
import Foundation
import Hummingbird

/// A named dependency check for `/ready`.
package struct ReadinessCheck: Sendable {
    package var name: String
    package var check: @Sendable () async throws -> Void
    package init(name: String, check: @escaping @Sendable () async throws -> Void) {
        self.name = name
        self.check = check
    }
}

/// `/health` (200 while the process runs), `/ready` (200 only while every dependency answers, else 503 naming
/// what is down) and `/metrics` (Prometheus text).
package enum HealthRoutes {
    package struct ReadyBody: Codable, Sendable, Equatable {
        package var status: String
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
        router.get("/ready") { _, _ in
            let results = await withTaskGroup(of: (String, String?).self) { group in
                for check in checks {
                    group.addTask {
                        do {
                            try await withTimeout(timeout) { try await check.check() }
                            return (check.name, nil)
                        } catch {
                            return (check.name, "\(error)")
                        }
                    }
                }
                var results: [String: String?] = [:]
                for await (name, failure) in group { results[name] = failure }
                return results
            }
            let down = results.compactMap { name, failure in failure.map { (name, $0) } }.sorted { $0.0 < $1.0 }
            let statuses = results.mapValues { $0 == nil ? "up" : "down" }
            guard down.isEmpty else {
                let message = down.map { "\($0.0) is unreachable: \($0.1)" }.joined(separator: "; ")
                let body = ReadyBody(
                    status: "not_ready", checks: statuses,
                    error: .init(code: .notReady, message: message, details: nil)
                )
                return APIError.response(status: .serviceUnavailable, body: body)
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

/// Thrown by ``withTimeout(_:_:)`` when the operation took too long.
package struct TimeoutError: Error, CustomStringConvertible {
    package var timeout: Duration
    package var description: String { "no answer within \(timeout)" }
}

/// Runs `operation`, cancelling it and throwing ``TimeoutError`` if it takes longer than `timeout`.
package func withTimeout<T: Sendable>(
    _ timeout: Duration, _ operation: @escaping @Sendable () async throws -> T
) async throws -> T {
    try await withThrowingTaskGroup(of: T.self) { group in
        group.addTask { try await operation() }
        group.addTask {
            try await Task.sleep(for: timeout)
            throw TimeoutError(timeout: timeout)
        }
        defer { group.cancelAll() }
        return try await group.next()!
    }
}

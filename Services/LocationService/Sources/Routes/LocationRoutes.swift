import Contracts
import Foundation
import Hummingbird
import ServiceKit

/// Location's REST API: a courier's queued positions, the technician's travel mode, and a job's tracking view.
struct LocationRoutes: Sendable {
    let database: Database
    let workflow: TrackingWorkflow
    let hub: TrackingHub

    /// A batch of positions an app queued while offline.
    struct PositionBatch: Codable, Sendable {
        var positions: [CourierPosition]
    }

    /// Each position's outcome in the order sent, and the counts.
    struct BatchResult: Codable, Sendable, ResponseEncodable {
        var accepted: Int
        var dropped: Int
        var results: [PositionOutcome]
    }

    struct TravelMode: Codable, Sendable {
        var active: Bool
    }

    static let maximumBatch = 100

    func register(on api: RouterGroup<ServiceRequestContext>) {
        api.post("couriers/me/positions") { request, context in
            let identity = try context.requireIdentity(.rider, .technician)
            let (batch, _) = try await request.decodeJSON(PositionBatch.self, context: context)
            guard (1...Self.maximumBatch).contains(batch.positions.count) else {
                throw APIError.validation("'positions' must hold 1 to \(Self.maximumBatch) positions")
            }
            let results = try await hub.receive(batch: batch.positions, from: identity)
            let accepted = results.count { $0 == .applied }
            return BatchResult(accepted: accepted, dropped: results.count - accepted, results: results)
        }
        api.post("tracking/:jobId/travel-mode") { request, context in
            let identity = try context.requireIdentity(.technician)
            let jobId = try Validate.identifier(try context.parameters.require("jobId"), "jobId")
            let (input, _) = try await request.decodeJSON(TravelMode.self, context: context)
            let job = try await database.transaction { connection in
                let job = try await workflow.setTravelMode(
                    jobId: jobId, technicianId: identity.userId, active: input.active, on: connection)
                _ = try await hub.announce([job], on: connection)
                return job
            }
            await hub.after([job])
            return TrackingStatus(job, lastUpdatedAt: nil)
        }
        api.get("tracking/:jobId") { _, context in
            let identity = try context.requireIdentity()
            return try await hub.view(jobId: try context.parameters.require("jobId"), for: identity)
        }
    }
}

extension TrackingStatus: ResponseEncodable {}

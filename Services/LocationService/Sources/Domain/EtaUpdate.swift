import AsyncHTTPClient
import Contracts
import Foundation
import Kafka
import NIOCore

/// The `eta` event: available with the figures and the sentences the app shows and reads out, or not.
package struct EtaUpdate: Codable, Sendable, Equatable {
    package var jobId: String
    package var available: Bool
    package var seconds: Int?
    package var arrivalAt: Date?
    package var distanceMeters: Int?
    package var text: String
    package var spokenText: String?

    /// "Arriving in 12 minutes" and "Technician is currently 2.5 km away and is expected to arrive in 12 minutes."
    package static func available(jobId: String, kind: JobKind, estimate: RouteEstimate, now: Date) -> EtaUpdate {
        let minutes = max(1, Int((estimate.seconds / 60).rounded(.up)))
        let duration = minutes == 1 ? "1 minute" : "\(minutes) minutes"
        let distance =
            estimate.meters < 1000
            ? "\(Int((estimate.meters / 10).rounded()) * 10) m" : String(format: "%.1f km", estimate.meters / 1000)
        let courier = kind == .delivery ? "Your rider" : "Technician"
        return EtaUpdate(
            jobId: jobId, available: true, seconds: Int(estimate.seconds.rounded()),
            arrivalAt: now.addingTimeInterval(estimate.seconds),
            distanceMeters: Int(estimate.meters.rounded()), text: "Arriving in \(duration)",
            spokenText: "\(courier) is currently \(distance) away and is expected to arrive in \(duration)."
        )
    }

    package static func unavailable(jobId: String, text: String = "ETA unavailable") -> EtaUpdate {
        EtaUpdate(jobId: jobId, available: false, text: text)
    }
}

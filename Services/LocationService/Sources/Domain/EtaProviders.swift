import AsyncHTTPClient
import Contracts
import Foundation
import Kafka
import NIOCore

/// Which ETA provider the service uses (`ETA_PROVIDER`).
package enum EtaProviderKind: String, Sendable, CaseIterable {
    case estimator
    case osrm
    case azure
}

/// A route estimate: how long and how far along the roads.
package struct RouteEstimate: Sendable, Equatable {
    package var seconds: Double
    package var meters: Double

    package init(seconds: Double, meters: Double) {
        self.seconds = seconds
        self.meters = meters
    }
}

/// Estimates travel from a courier's position to a destination.
package protocol EtaProvider: Sendable {
    /// - Parameter learnedSpeedMps: the courier's speed over recent positions, if known.
    func estimate(from: GeoPoint, to: GeoPoint, learnedSpeedMps: Double?) async throws -> RouteEstimate
}

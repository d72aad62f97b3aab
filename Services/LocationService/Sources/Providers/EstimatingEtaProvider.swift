import AsyncHTTPClient
import Contracts
import Foundation
import Kafka
import NIOCore

/// The built-in estimator: the great-circle distance times a road factor, over the courier's learned speed (or a
/// default city speed). Needs no outside service.
package struct EstimatingEtaProvider: EtaProvider {
    package var roadFactor: Double
    package var defaultSpeedMps: Double

    package init(roadFactor: Double, defaultSpeedMps: Double) {
        self.roadFactor = roadFactor
        self.defaultSpeedMps = defaultSpeedMps
    }

    package func estimate(from: GeoPoint, to: GeoPoint, learnedSpeedMps: Double?) async throws -> RouteEstimate {
        let meters = from.meters(to: to) * roadFactor
        // A courier stuck at a light has not become slow for the rest of the trip: keep the speed in a city's range.
        let speed = min(max(learnedSpeedMps ?? defaultSpeedMps, 2), 30)
        return RouteEstimate(seconds: meters / speed, meters: meters)
    }
}

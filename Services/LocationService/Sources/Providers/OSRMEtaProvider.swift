import AsyncHTTPClient
import Contracts
import Foundation
import Kafka
import NIOCore

/// OSRM's route service: `GET {base}/route/v1/{profile}/{lng},{lat};{lng},{lat}?overview=false`.
package struct OSRMEtaProvider: EtaProvider {
    package var baseURL: URL
    package var profile = "driving"
    package var timeout: Duration
    package var client: HTTPClient

    package init(baseURL: URL, timeout: Duration, client: HTTPClient = .shared) {
        self.baseURL = baseURL
        self.timeout = timeout
        self.client = client
    }

    struct Answer: Decodable {
        struct Route: Decodable {
            var duration: Double
            var distance: Double
        }

        var code: String
        var routes: [Route]?
    }

    package func estimate(from: GeoPoint, to: GeoPoint, learnedSpeedMps: Double?) async throws -> RouteEstimate {
        let base =
            baseURL.absoluteString.hasSuffix("/") ? String(baseURL.absoluteString.dropLast()) : baseURL.absoluteString
        let url = "\(base)/route/v1/\(profile)/\(from.lng),\(from.lat);\(to.lng),\(to.lat)?overview=false"
        let answer = try await fetchJSON(Answer.self, url: url, client: client, timeout: timeout)
        guard answer.code == "Ok", let route = answer.routes?.first else {
            throw EtaProviderError(description: "OSRM answered \(answer.code) without a route")
        }
        return RouteEstimate(seconds: route.duration, meters: route.distance)
    }
}

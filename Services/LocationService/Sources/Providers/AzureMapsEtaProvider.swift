import AsyncHTTPClient
import Contracts
import Foundation
import Kafka
import NIOCore

/// Azure Maps Route Directions: `GET {base}/route/directions/json?api-version=1.0&query={lat},{lng}:{lat},{lng}`,
/// with live traffic.
package struct AzureMapsEtaProvider: EtaProvider {
    package var baseURL: URL
    package var subscriptionKey: String
    package var timeout: Duration
    package var client: HTTPClient

    package init(baseURL: URL, subscriptionKey: String, timeout: Duration, client: HTTPClient = .shared) {
        self.baseURL = baseURL
        self.subscriptionKey = subscriptionKey
        self.timeout = timeout
        self.client = client
    }

    struct Answer: Decodable {
        struct Route: Decodable {
            struct Summary: Decodable {
                var lengthInMeters: Double
                var travelTimeInSeconds: Double
            }

            var summary: Summary
        }

        var routes: [Route]?
    }

    package func estimate(from: GeoPoint, to: GeoPoint, learnedSpeedMps: Double?) async throws -> RouteEstimate {
        var components = URLComponents(
            url: baseURL.appendingPathComponent("route/directions/json"), resolvingAgainstBaseURL: false)
        components?.queryItems = [
            URLQueryItem(name: "api-version", value: "1.0"),
            URLQueryItem(name: "query", value: "\(from.lat),\(from.lng):\(to.lat),\(to.lng)"),
            URLQueryItem(name: "travelMode", value: "car"),
            URLQueryItem(name: "traffic", value: "true"),
            URLQueryItem(name: "subscription-key", value: subscriptionKey),
        ]
        guard let url = components?.url?.absoluteString else {
            throw EtaProviderError(description: "bad Azure Maps URL")
        }
        let answer = try await fetchJSON(Answer.self, url: url, client: client, timeout: timeout)
        guard let summary = answer.routes?.first?.summary else {
            throw EtaProviderError(description: "Azure Maps found no route")
        }
        return RouteEstimate(seconds: summary.travelTimeInSeconds, meters: summary.lengthInMeters)
    }
}

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

/// A routing provider's failure: an HTTP status, a body it could not read, or no route.
package struct EtaProviderError: Error, CustomStringConvertible {
    package var description: String
}

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

/// GETs `url` and decodes a 200 answer's JSON; anything else throws.
private func fetchJSON<T: Decodable>(_ type: T.Type, url: String, client: HTTPClient, timeout: Duration) async throws
    -> T
{
    let request = HTTPClientRequest(url: url)
    let response = try await client.execute(request, timeout: .milliseconds(timeout.milliseconds))
    let body = try await response.body.collect(upTo: 1 << 20)
    guard response.status == .ok else {
        throw EtaProviderError(description: "the routing service answered \(response.status.code)")
    }
    do {
        return try JSONDecoder().decode(T.self, from: body)
    } catch {
        throw EtaProviderError(description: "unreadable routing answer: \(error)")
    }
}

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

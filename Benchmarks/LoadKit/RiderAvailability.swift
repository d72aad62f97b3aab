import AsyncHTTPClient
import Foundation
import NIOCore

/// The load generators' riders going online through the allocation service's REST API.
package enum RiderAvailability {
    /// `PUT /v1/riders/me/availability` online at (`lat`, `lng`), fixed now; returns the answer's status code.
    package static func goOnline(
        client: HTTPClient, allocation: String, token: String, lat: Double, lng: Double
    ) async throws -> UInt {
        var request = HTTPClientRequest(url: allocation + "/v1/riders/me/availability")
        request.method = .PUT
        request.headers.add(name: "Authorization", value: "Bearer \(token)")
        request.headers.add(name: "Content-Type", value: "application/json")
        let recordedAt = ISO8601DateFormatter().string(from: Date())
        request.body = .bytes(
            ByteBuffer(
                string:
                    #"{"status":"online","location":{"lat":\#(lat),"lng":\#(lng),"accuracyMeters":10,"recordedAt":"\#(recordedAt)"}}"#
            ))
        let response = try await client.execute(request, timeout: .seconds(30))
        _ = try await response.body.collect(upTo: 1 << 16)
        return response.status.code
    }
}

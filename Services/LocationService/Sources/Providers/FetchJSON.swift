import AsyncHTTPClient
import Contracts
import Foundation
import Kafka
import NIOCore

/// GETs `url` and decodes a 200 answer's JSON; anything else throws.
func fetchJSON<T: Decodable>(_ type: T.Type, url: String, client: HTTPClient, timeout: Duration) async throws
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

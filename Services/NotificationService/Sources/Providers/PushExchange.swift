import AsyncHTTPClient
import Contracts
import Foundation
import JWTKit
import Kafka
import Logging
import NIOCore
import NIOHTTP1
import Synchronization

/// A status and the Retry-After it came with, as a retry outcome (or nil if the status is not worth a retry).
func retryOutcome(status: Int, headers: HTTPHeaders, answer: String) -> PushOutcome? {
    guard status == 429 || status >= 500 else { return nil }
    let after = headers.first(name: "Retry-After").flatMap { Int($0.trimmingCharacters(in: .whitespaces)) }.map {
        Duration.seconds($0)
    }
    return .retry(status: status, answer: answer, after: after)
}

/// Runs `request` and reads at most 64 KiB of the answer; a transport failure or time-out is a retry.
func exchange(_ request: HTTPClientRequest, client: HTTPClient, timeout: Duration) async -> Result<
    (Int, HTTPHeaders, String), PushTransportError
> {
    do {
        let response = try await client.execute(request, timeout: .milliseconds(timeout.milliseconds))
        let body = try await response.body.collect(upTo: 64 * 1024)
        return .success((Int(response.status.code), response.headers, String(buffer: body)))
    } catch {
        return .failure(PushTransportError(description: "\(error)"))
    }
}

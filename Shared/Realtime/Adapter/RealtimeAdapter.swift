import Contracts
import Foundation

/// An emit to rooms of a namespace, as sent to the other instances of a service.
package struct RealtimeBroadcast: Codable, Sendable, Equatable {
    /// The instance that emitted it (which already delivered it locally).
    package var origin: String
    package var namespace: String
    package var rooms: [String]
    /// Socket ids left out.
    package var except: [String]
    /// The encoded Socket.IO packet.
    package var packet: String
    /// Its binary attachments, base64.
    package var attachments: [String]
    /// Set for emits of which only the latest matters: a pending one with the same key is replaced.
    package var latestKey: String?
}

/// Carries broadcasts between the instances of a service, so an emit to a room reaches sockets held by any
/// instance.
package protocol RealtimeAdapter: Sendable {
    /// Hands a broadcast to the other instances.
    func publish(_ broadcast: RealtimeBroadcast) async throws
    /// Receives the broadcasts of the other instances (not those of `origin`, this one) until cancelled.
    func run(origin: String, deliver: @escaping @Sendable (RealtimeBroadcast) async -> Void) async throws
}

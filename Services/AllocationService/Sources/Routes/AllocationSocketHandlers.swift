import Logging
import Realtime
import RealtimePlatform
import ServiceKit

/// The `/rider` namespace: a rider's socket on connect, offers `received`, and the socket's presence.
package struct AllocationSocketHandlers: Sendable {
    let notifier: RiderNotifier
    let presence: SocketPresence
    let database: Database
    let logger: Logger

    /// Registers the connect handler, `received`, and the presence handlers on `namespace`.
    package func register(on namespace: SocketIONamespace) {
        namespace.onConnect { socket in
            await notifier.connected(socket)
            // A recovered socket got its missed emits, the offer among them.
            if !socket.recovered { await notifier.resendPendingOffer(to: socket) }
        }
        namespace.forgetPresenceOnDisconnect(presence, database: database, logger: logger)
        namespace.reportAppState(to: presence, database: database)
        namespace.on("received", OfferReceipt.self) { socket, receipt in
            try await notifier.received(receipt, from: socket)
        }
    }
}

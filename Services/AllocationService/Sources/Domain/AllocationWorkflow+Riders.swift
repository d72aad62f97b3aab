import Contracts
import Foundation
import PostgresNIO
import RealtimePlatform
import ServiceKit

/// Riders' availability: going Online with a precise fix or Offline, how their app sees them, and their positions.
extension AllocationWorkflow {
    /// The rider goes online (with a precise, fresh fix) or offline. A pending offer is declined by going offline.
    package func setAvailability(
        rider: PersonRef, online: Bool, location: RiderLocation?, on connection: PostgresConnection
    ) async throws -> (RiderView, [RiderNotice]) {
        let current = try await store.rider(rider.id, forUpdate: true, on: connection)
        if current?.status == .delivering {
            throw AllocationRuleViolation.riderOnDelivery(orderId: current?.currentOrderId)
        }
        var notices: [RiderNotice] = []
        if online {
            let now = self.now()
            if let location {
                try Validate.position(
                    lat: location.lat, lng: location.lng, accuracyMeters: location.accuracyMeters, "location")
            }
            let location = try AllocationRules.requirePreciseFix(location, now: now, settings: settings)
            try await store.putOnline(rider, at: location, on: connection)
            // Someone new is online: orders waiting for a rider try again now.
            try await store.retryWaitingNow(now, on: connection)
        } else {
            if current?.status == .offered {
                for offer in try await store.pendingOffers(ofRider: rider.id, on: connection) {
                    try await close(offer, as: .rejected, riderBecomes: .offline, on: connection)
                    notices += try await offerNext(orderId: offer.orderId, on: connection)
                }
            }
            try await store.putOffline(rider, on: connection)
        }
        return (try await self.rider(rider.id, on: connection), notices)
    }

    /// The rider as their app sees them (offline if never seen).
    package func rider(_ riderId: String, on connection: PostgresConnection) async throws -> RiderView {
        var view =
            try await store.rider(riderId, on: connection)
            ?? RiderView(riderId: riderId, status: .offline, location: nil, currentOrderId: nil)
        view.connected = try await presence.isPresent(
            userId: riderId, room: SocketPresence.anywhere, now: now(), on: connection)
        view.offlineMessage = view.offlineReason?.message(settings: settings)
        return view
    }

    /// A newer position from Location (couriers.positions) moves the rider.
    package func moved(_ position: PositionUpdated, on connection: PostgresConnection) async throws {
        // An imprecise fix neither places the rider for matching nor keeps them Online (BR-RDR-PERM-01).
        guard position.role == .rider,
            AllocationRules.isPrecise(accuracyMeters: position.accuracyMeters, settings: settings)
        else { return }
        try await store.move(position, on: connection)
    }
}

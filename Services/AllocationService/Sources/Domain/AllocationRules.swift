import Contracts
import Foundation
import ServiceKit

/// What an offer promises the rider, decided when it is made.
package struct OfferTerms: Sendable, Equatable {
    /// From the rider to the vendor, in kilometres to one decimal.
    package var distanceKm: Double
    /// To the vendor, then to the customer, in kilometres to one decimal.
    package var tripKm: Double
    package var earnings: Decimal
    package var expiresAt: Date
    /// The rider's app must confirm receiving the offer by then, or the rider is recorded unreachable.
    package var receiptDeadline: Date
}

/// Allocation's decisions: who may answer an offer and when, what an offer pays, when to try again, who may go
/// online, and what the rider's push says. Pure: no I/O; time is passed in.
package enum AllocationRules {
    /// A rider may answer an offer only while it is pending and before its deadline.
    package static func requirePending(_ status: OfferStatus, expiresAt: Date, now: Date)
        throws(AllocationRuleViolation)
    {
        switch status {
        case .pending where expiresAt > now: return
        case .pending, .timedOut, .unreachable: throw .offerExpired
        case .rescinded: throw .offerRescinded
        case .accepted, .rejected: throw .offerNotPending(status)
        }
    }

    /// The terms of an offer to a rider `toVendorMeters` from the vendor, for a delivery `toCustomerMeters` from
    /// the vendor, made at `now`.
    package static func terms(
        toVendorMeters: Double, toCustomerMeters: Double, now: Date, settings: AllocationSettings
    ) -> OfferTerms {
        let tripKilometres = (toVendorMeters + toCustomerMeters) / 1000
        return OfferTerms(
            distanceKm: (toVendorMeters / 100).rounded() / 10,
            tripKm: (tripKilometres * 10).rounded() / 10,
            earnings: earnings(tripKilometres: tripKilometres),
            expiresAt: now + settings.offerTimeout,
            receiptDeadline: now + settings.receiptTimeout
        )
    }

    /// What the rider earns for a trip (to the vendor, then to the customer): ₹25 plus ₹10 a kilometre, whole
    /// rupees.
    package static func earnings(tripKilometres: Double) -> Decimal {
        Decimal((25 + 10 * tripKilometres).rounded())
    }

    /// How long an order nobody could take waits before attempt `attempt + 1`: the initial delay doubling per
    /// attempt, at most the maximum.
    package static func retryDelay(afterAttempt attempt: Int, settings: AllocationSettings) -> Duration {
        min(settings.retryInitial * (1 << min(max(attempt, 1) - 1, 16)), settings.retryMaximum)
    }

    /// A rider may go online only with a fix precise to the configured accuracy, no older than the maximum age,
    /// and not from the future (a minute of clock skew allowed). Returns the fix.
    package static func requirePreciseFix(
        _ location: RiderLocation?, now: Date, settings: AllocationSettings
    ) throws(AllocationRuleViolation) -> RiderLocation {
        guard let location, location.accuracyMeters <= settings.preciseAccuracyMeters,
            now.timeIntervalSince(location.recordedAt) <= settings.locationMaxAge.timeInterval,
            location.recordedAt.timeIntervalSince(now) < 60
        else {
            throw .preciseLocationRequired(
                accuracyMeters: settings.preciseAccuracyMeters,
                maxAgeSeconds: settings.locationMaxAge.components.seconds)
        }
        return location
    }

    /// Whether a position is precise enough to match a rider by (the accuracy going Online needs).
    package static func isPrecise(accuracyMeters: Double, settings: AllocationSettings) -> Bool {
        accuracyMeters <= settings.preciseAccuracyMeters
    }

    /// The push that tells a rider the system took them Offline, and why.
    package static func offlinePush(riderId: String, reason: OfflineReason, now: Date, settings: AllocationSettings)
        -> PushRequested
    {
        PushRequested(
            notificationId: "offline-\(riderId)-\(Int(now.timeIntervalSince1970))", userId: riderId,
            kind: .riderOffline, title: "You are Offline", body: reason.message(settings: settings),
            data: ["link": "app://availability", "reason": reason.rawValue], priority: .high,
            collapseKey: "offline-\(riderId)", ttlSeconds: 3600, correlationId: riderId
        )
    }

    /// The high-priority push that tells a rider about an offer (it lives as long as the offer).
    package static func offerPush(
        offerId: String, orderId: String, riderId: String, earnings: Decimal, settings: AllocationSettings
    )
        -> PushRequested
    {
        PushRequested(
            notificationId: "offer-\(offerId)", userId: riderId, kind: .offer, title: "New delivery offer",
            body: "New delivery offer! Earn an estimated ₹\(earnings).",
            data: ["link": "app://offers/\(offerId)", "offerId": offerId, "orderId": orderId], priority: .high,
            collapseKey: "offer-\(offerId)", ttlSeconds: settings.offerTimeoutSeconds,
            sound: "offer_alert", correlationId: orderId, wakesApp: true
        )
    }

    /// What a rider is told when the order they were delivering is cancelled.
    package static let cancellationMessage = "This order was cancelled. You don't need to deliver it."

    /// The push that tells a rider without a live socket that their order was cancelled.
    package static func cancellationPush(orderId: String, riderId: String) -> PushRequested {
        PushRequested(
            notificationId: "order-cancelled-\(orderId)-\(riderId)", userId: riderId, kind: .orderCancelled,
            title: "Order cancelled", body: cancellationMessage,
            data: ["link": "app://orders/\(orderId)", "orderId": orderId], priority: .high,
            collapseKey: "order-\(orderId)", ttlSeconds: 3600, correlationId: orderId
        )
    }

    /// An operator may re-assign an order to `riderStatus`'s rider, or release it, only before pickup; the
    /// rider must be Online and free.
    package static func requireReassignable(_ allocation: AllocationStatus) throws(AllocationRuleViolation) {
        switch allocation {
        case .searching, .waiting, .assigned: return
        case .inTransit, .cancelled, .completed: throw .notReassignable(allocation)
        }
    }

    /// The rider an operator assigns must be Online, holding no offer and no order.
    package static func requireAvailable(riderId: String, _ status: RiderStatus?) throws(AllocationRuleViolation) {
        guard status == .online else { throw .riderNotAvailable(riderId: riderId, status) }
    }

    /// What a rider is told when an operator gives them an order.
    package static let assignedMessage = "Operations assigned you a delivery. Open it to see the pickup."

    /// What a rider is told when their order is taken away from them before pickup.
    package static let unassignedMessage = "This delivery was re-assigned by operations. You don't need to pick it up."

    /// The push that tells a rider without a live socket that an operator gave them an order.
    package static func assignedPush(orderId: String, riderId: String, at now: Date) -> PushRequested {
        PushRequested(
            notificationId: "order-assigned-\(orderId)-\(riderId)-\(Int(now.timeIntervalSince1970))", userId: riderId,
            kind: .orderAssigned,
            title: "New delivery assigned", body: assignedMessage,
            data: ["link": "app://orders/\(orderId)", "orderId": orderId], priority: .high,
            collapseKey: "order-\(orderId)", ttlSeconds: 3600, correlationId: orderId
        )
    }

    /// The push that tells a rider without a live socket that their order was taken away.
    package static func unassignedPush(orderId: String, riderId: String, at now: Date) -> PushRequested {
        PushRequested(
            notificationId: "order-unassigned-\(orderId)-\(riderId)-\(Int(now.timeIntervalSince1970))",
            userId: riderId, kind: .orderUnassigned, title: "Delivery re-assigned", body: unassignedMessage,
            data: ["link": "app://orders/\(orderId)", "orderId": orderId], priority: .high,
            collapseKey: "order-\(orderId)", ttlSeconds: 3600, correlationId: orderId
        )
    }

    /// Why an order found nobody.
    package static func noRiderReason(settings: AllocationSettings) -> String {
        "no eligible rider within \(settings.radiusMeters / 1000) km"
    }
}

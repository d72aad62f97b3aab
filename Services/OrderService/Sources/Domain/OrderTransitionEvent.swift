import Contracts
import Foundation

/// The event an applied order action records, decided from the order after it (and its rider before), with no
/// I/O: what `OrderWorkflow.apply` writes to the log, the outbox and the order's emits.
package enum OrderTransitionEvent {
    /// The payload of the event `action` by `actor` records on `order` (already changed) at `now`; nil when it
    /// records none (a proof photo upload).
    package static func payload(
        for action: OrderAction, order: OrderView, previousRider: PersonRef?, actor: OrderActor?, reason: String?,
        offerId: String?, at now: Date
    ) -> (any EventPayload)? {
        let orderId = order.id
        switch action {
        case .accept:
            return OrderAccepted(orderId: orderId, customerId: order.customerId, vendorId: order.vendor.id)
        case .markReady:
            return OrderReadyForPickup(
                orderId: orderId, customerId: order.customerId, vendor: order.vendor,
                deliveryArea: order.deliveryAddress.area, deliveryLocation: order.deliveryAddress.point,
                totalAmount: order.totalAmount
            )
        case .arrive:
            return RiderArrivedAtStore(
                orderId: orderId, customerId: order.customerId, vendorId: order.vendor.id, riderId: actor?.id ?? "")
        case .pickUp:
            return OrderPickedUp(
                orderId: orderId, customerId: order.customerId, vendor: order.vendor,
                rider: pickupRider(of: order, actor: actor), destination: order.deliveryAddress, pickedUpAt: now
            )
        case .deliver:
            return OrderDelivered(
                orderId: orderId, customerId: order.customerId, vendorId: order.vendor.id,
                riderId: order.rider?.id ?? "", deliveredAt: now
            )
        case .cancel:
            return OrderCancelled(
                orderId: orderId, customerId: order.customerId, vendorId: order.vendor.id, riderId: order.rider?.id,
                cancelledBy: actor?.role ?? .admin, reason: reason
            )
        case .assignRider(let rider):
            if let previousRider, previousRider.id != rider.id {
                return RiderReassigned(
                    orderId: orderId, customerId: order.customerId, vendorId: order.vendor.id, offerId: offerId,
                    rider: rider, previousRiderId: previousRider.id
                )
            }
            return RiderAssigned(
                orderId: orderId, customerId: order.customerId, vendorId: order.vendor.id, offerId: offerId,
                rider: rider)
        case .unassignRider:
            return RiderUnassigned(
                orderId: orderId, customerId: order.customerId, vendorId: order.vendor.id,
                previousRiderId: previousRider?.id ?? "")
        case .uploadProofPhoto:
            return nil
        }
    }

    /// Who picked `order` up: its rider, or the acting rider if the order names none.
    package static func pickupRider(of order: OrderView, actor: OrderActor?) -> PersonRef {
        order.rider ?? PersonRef(id: actor?.id ?? "", name: "")
    }
}

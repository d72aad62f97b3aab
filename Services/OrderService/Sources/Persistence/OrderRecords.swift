import Contracts
import Foundation
import Hummingbird
import Realtime

// The order service's views of its records, kept together: each is a few fields and they are read together.

/// A delivery order as stored and as the API returns it.
package struct OrderView: Codable, Sendable, Equatable {
    /// Lower-case UUID.
    package var id: String
    package var status: OrderStatus
    package var customerId: String
    package var vendor: VendorRef
    package var deliveryAddress: Address
    package var paymentMode: PaymentMode
    package var totalAmount: Decimal
    package var requiresPhotoProof: Bool
    package var rider: PersonRef?
    package var riderArrivedAt: Date?
    package var proofPhoto: ProofPhotoView?
    package var version: Int
    package var createdAt: Date
    package var updatedAt: Date

    /// What the rules need to decide a transition.
    package var snapshot: OrderSnapshot {
        OrderSnapshot(
            status: status, customerId: customerId, vendorId: vendor.id, rider: rider,
            riderArrived: riderArrivedAt != nil,
            paymentMode: paymentMode, requiresPhotoProof: requiresPhotoProof, hasProofPhoto: proofPhoto != nil
        )
    }

    /// Whether `identity` may read this order: its customer, vendor, assigned rider, or an admin.
    package func isVisible(to userId: String, role: Role) -> Bool {
        switch role {
        case .admin: true
        case .customer: userId == customerId
        case .vendor: userId == vendor.id
        case .rider: userId == rider?.id
        case .technician: false
        }
    }
}

/// The uploaded proof-of-delivery photo, without its bytes.
package struct ProofPhotoView: Codable, Sendable, Equatable {
    package var contentType: String
    package var sizeBytes: Int
    package var uploadedAt: Date
}

/// A vendor as the API returns it.
package struct VendorView: Codable, Sendable, Equatable {
    package var id: String
    package var name: String
    package var address: Address
}

/// A service request as the API returns it.
package struct ServiceRequestView: Codable, Sendable, Equatable {
    /// Lower-case UUID.
    package var id: String
    package var status: ServiceRequestStatus
    package var customerId: String
    package var serviceAddress: Address
    package var description: String
    package var technician: PersonRef?
    package var version: Int
    package var createdAt: Date
    package var updatedAt: Date

    package var snapshot: ServiceRequestSnapshot {
        ServiceRequestSnapshot(status: status, customerId: customerId, technician: technician)
    }

    package func isVisible(to userId: String, role: Role) -> Bool {
        switch role {
        case .admin: true
        case .customer: userId == customerId
        case .technician: userId == technician?.id
        default: false
        }
    }
}

/// One entry of the immutable event log.
package struct OrderEventView: Codable, Sendable, Equatable {
    package var sequence: Int
    package var eventId: String
    package var type: String
    package var actorId: String?
    package var actorRole: String?
    package var occurredAt: Date
    /// The event's payload as published.
    package var payload: JSONValue
}

extension OrderView: ResponseEncodable {}
extension VendorView: ResponseEncodable {}
extension ServiceRequestView: ResponseEncodable {}
extension OrderEventView: ResponseEncodable {}

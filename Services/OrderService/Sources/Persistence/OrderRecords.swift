import Contracts
import Foundation
import Hummingbird
import Realtime

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

/// A record the order service was asked for and does not have, or one it already has.
package enum OrderRecordError: Error, Equatable, Sendable {
    case noOrder(UUID)
    case noServiceRequest(UUID)
    case vendorExists(String)
}

/// Where a page of orders ended: its last order's creation time (microseconds since 1970, as Postgres keeps it) and
/// id. Sent to clients as the opaque `after` text `<micros>.<id>`; a time outside ``plausibleMicros`` is no cursor.
package struct OrderPageCursor: Sendable, Equatable {
    package var createdMicros: Int64
    package var orderId: UUID

    package init(createdMicros: Int64, orderId: UUID) {
        self.createdMicros = createdMicros
        self.orderId = orderId
    }

    /// The creation times a page can end at: from 1970 to the end of year 9999 (the last instant an ISO-8601 date of
    /// the API can name; Postgres keeps far more, but no order is created outside these).
    package static let plausibleMicros: ClosedRange<Int64> = 0...253_402_300_799_999_999

    /// Reads the `after` text of a previous page; `nil` if it is not one (malformed, or a time out of range).
    package init?(text: String) {
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 2, let micros = Int64(parts[0]), Self.plausibleMicros.contains(micros),
            let id = UUID(uuidString: String(parts[1]))
        else {
            return nil
        }
        self.init(createdMicros: micros, orderId: id)
    }

    /// Whole seconds and the remaining microseconds of the creation time: each exact as the float8 Postgres
    /// multiplies an interval by (the microseconds alone would not be, past 2^53).
    var createdSecondsAndMicros: (seconds: Int64, micros: Int64) {
        let (seconds, micros) = createdMicros.quotientAndRemainder(dividingBy: 1_000_000)
        return (seconds, micros)
    }

    package var text: String { "\(createdMicros).\(orderId.uuidString.lowercased())" }
}

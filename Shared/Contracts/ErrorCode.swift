/// A stable, machine-readable error code, sent as `{"error":{"code":...,"message":...}}`. Apps switch on the
/// code, never on the message. Extensible: a service may define its own with `ErrorCode("SOME_CODE")`.
package struct ErrorCode: StringVocabulary {
    package var rawValue: String
    package init(rawValue: String) { self.rawValue = rawValue }

    // Requests and authentication
    package static let badRequest: ErrorCode = "BAD_REQUEST"
    package static let invalidJSON: ErrorCode = "INVALID_JSON"
    package static let validationFailed: ErrorCode = "VALIDATION_FAILED"
    /// A string holds a character no field accepts (the NUL character).
    package static let invalidCharacter: ErrorCode = "INVALID_CHARACTER"
    package static let unauthorized: ErrorCode = "UNAUTHORIZED"
    package static let invalidToken: ErrorCode = "INVALID_TOKEN"
    package static let tokenExpired: ErrorCode = "TOKEN_EXPIRED"
    package static let tokenNotYetValid: ErrorCode = "TOKEN_NOT_YET_VALID"
    package static let tokenTypeNotAccepted: ErrorCode = "TOKEN_TYPE_NOT_ACCEPTED"
    package static let forbidden: ErrorCode = "FORBIDDEN"
    package static let notFound: ErrorCode = "NOT_FOUND"
    package static let alreadyExists: ErrorCode = "ALREADY_EXISTS"
    package static let methodNotAllowed: ErrorCode = "METHOD_NOT_ALLOWED"
    package static let payloadTooLarge: ErrorCode = "PAYLOAD_TOO_LARGE"
    /// The request would create an event larger than the broker takes.
    package static let eventTooLarge: ErrorCode = "EVENT_TOO_LARGE"
    package static let unsupportedMediaType: ErrorCode = "UNSUPPORTED_MEDIA_TYPE"
    package static let rateLimited: ErrorCode = "RATE_LIMITED"
    package static let idempotencyKeyReused: ErrorCode = "IDEMPOTENCY_KEY_REUSED"
    package static let notReady: ErrorCode = "NOT_READY"
    /// The service lost its database connection mid-request (Postgres restarting, the network): 503, try again.
    package static let databaseUnavailable: ErrorCode = "DATABASE_UNAVAILABLE"
    /// `/ready`: the instance serves, but something needs an operator (e.g. an outbox dead letter).
    package static let degraded: ErrorCode = "DEGRADED"
    package static let internalError: ErrorCode = "INTERNAL_ERROR"

    // Orders and pickup (RDR-016, RDR-020)
    package static let orderStateConflict: ErrorCode = "ORDER_STATE_CONFLICT"
    package static let orderCancelled: ErrorCode = "ORDER_CANCELLED"
    package static let notAssignedRider: ErrorCode = "NOT_ASSIGNED_RIDER"
    package static let proofPhotoRequired: ErrorCode = "PROOF_PHOTO_REQUIRED"
    package static let riderNotArrived: ErrorCode = "RIDER_NOT_ARRIVED"
    package static let serviceRequestStateConflict: ErrorCode = "SERVICE_REQUEST_STATE_CONFLICT"

    // Chat (CUS-032)
    package static let chatNotAvailable: ErrorCode = "CHAT_NOT_AVAILABLE"
    package static let chatClosed: ErrorCode = "CHAT_CLOSED"
    package static let emptyMessage: ErrorCode = "EMPTY_MESSAGE"
    package static let messageTooLong: ErrorCode = "MESSAGE_TOO_LONG"

    // Allocation (RDR-010, RDR-020)
    package static let preciseLocationRequired: ErrorCode = "PRECISE_LOCATION_REQUIRED"
    package static let noActiveOffer: ErrorCode = "NO_ACTIVE_OFFER"
    package static let offerExpired: ErrorCode = "OFFER_EXPIRED"
    package static let offerRescinded: ErrorCode = "OFFER_RESCINDED"
    package static let offerNotPending: ErrorCode = "OFFER_NOT_PENDING"
    package static let riderOnDelivery: ErrorCode = "RIDER_ON_DELIVERY"
    package static let orderNotReassignable: ErrorCode = "ORDER_NOT_REASSIGNABLE"
    package static let riderNotAvailable: ErrorCode = "RIDER_NOT_AVAILABLE"
    package static let noRiderAssigned: ErrorCode = "NO_RIDER_ASSIGNED"
}

/// A typed, extensible vocabulary of strings (error codes, push kinds): the system's words are static members, a
/// service may add its own with `init(_:)`, and JSON carries the plain string.
package protocol StringVocabulary: RawRepresentable, Hashable, Codable, Sendable, CustomStringConvertible,
    ExpressibleByStringLiteral
where RawValue == String {
    init(rawValue: String)
}

extension StringVocabulary {
    package init(_ rawValue: String) { self.init(rawValue: rawValue) }
    package init(stringLiteral value: String) { self.init(rawValue: value) }
    package var description: String { rawValue }
}

/// An error answered to a client as `{"error":{"code":...,"message":...}}`, over HTTP or a socket.
package protocol CodedError: Error {
    var code: ErrorCode { get }
    var message: String { get }
}

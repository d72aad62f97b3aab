import Contracts
import Foundation
import ServiceKit

/// Why the system took a rider Offline.
package enum OfflineReason: String, Codable, Sendable {
    /// No precise fix for `RIDER_OFFLINE_WITHOUT_FIX_SECONDS` while Online (BR-RDR-PERM-01).
    case noPreciseLocation = "no_precise_location"
    /// An offer reached neither the rider's socket nor their phone in time (RDR-010 AC-006).
    case unreachable

    /// What the rider is told.
    package func message(settings: AllocationSettings) -> String {
        switch self {
        case .noPreciseLocation:
            let minutes = max(1, settings.offlineWithoutFix.components.seconds / 60)
            return
                "You were set Offline: no precise location for \(minutes) minute\(minutes == 1 ? "" : "s"). Turn on precise location and go Online again."
        case .unreachable:
            return
                "You were set Offline: a delivery offer could not reach your phone. Go Online again when you are ready."
        }
    }
}

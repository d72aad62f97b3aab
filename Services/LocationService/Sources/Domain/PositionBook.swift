import Contracts
import Foundation
import Realtime
import ServiceKit
import Synchronization

/// The latest position of every courier this instance knows of, in memory only (positions never reach
/// Postgres): from couriers connected here, and from couriers.positions for those connected elsewhere. Also each
/// courier's rate limit, publication throttle and recent track (for the speed the estimator learns).
package final class PositionBook: Sendable {
    /// A position, when this instance received it, and whether from the courier (not from another instance).
    package struct Entry: Sendable, Equatable {
        package var position: CourierPosition
        package var receivedAt: Date
        package var fromCourier: Bool
    }

    /// What became of a position offered to the book.
    package enum Outcome: Sendable, Equatable {
        /// The courier's newest position; `publish` if couriers.positions is due one.
        case accepted(publish: Bool)
        /// Not used: not newer than the last, too coarse, or a jump (``TrackingRules/screen(_:after:settings:)``).
        case dropped(PositionOutcome)
    }

    private struct Courier {
        var latest: Entry?
        var track: [CourierPosition] = []
        var bucket: TokenBucket
        var publishedAt: Date?
    }

    private let couriers = Mutex<[String: Courier]>([:])
    private let rate: Double
    private let burst: Int
    private let publishInterval: TimeInterval
    private let settings: LocationSettings
    /// The window of positions the learned speed is taken over.
    static let trackWindow: TimeInterval = 120

    package init(settings: LocationSettings) {
        self.rate = settings.positionRate
        self.burst = settings.positionBurst
        self.publishInterval = settings.publishInterval.timeInterval
        self.settings = settings
    }

    /// Spends one of the courier's rate-limit tokens: one per position from a socket, one per queued batch.
    package func admit(_ courierId: String) -> Bool {
        couriers.withLock { couriers in
            var courier = couriers[courierId] ?? Courier(bucket: TokenBucket(eventsPerSecond: rate, burst: burst))
            defer { couriers[courierId] = courier }
            return courier.bucket.take()
        }
    }

    /// Offers a courier's own position (from their socket or REST), once ``admit(_:)`` let it in.
    package func record(_ position: CourierPosition, courierId: String, now: Date) -> Outcome {
        couriers.withLock { couriers in
            var courier = couriers[courierId] ?? Courier(bucket: TokenBucket(eventsPerSecond: rate, burst: burst))
            defer { couriers[courierId] = courier }
            if let dropped = TrackingRules.screen(position, after: courier.latest?.position, settings: settings) {
                return .dropped(dropped)
            }
            courier.latest = Entry(position: position, receivedAt: now, fromCourier: true)
            courier.track.append(position)
            courier.track.removeAll { position.recordedAt.timeIntervalSince($0.recordedAt) > Self.trackWindow }
            let due = courier.publishedAt.map { now.timeIntervalSince($0) >= publishInterval } ?? true
            if due { courier.publishedAt = now }
            return .accepted(publish: due)
        }
    }

    /// A position another instance published on couriers.positions; kept if newer.
    package func learn(_ position: CourierPosition, courierId: String, now: Date) {
        couriers.withLock { couriers in
            var courier = couriers[courierId] ?? Courier(bucket: TokenBucket(eventsPerSecond: rate, burst: burst))
            if courier.latest.map({ $0.position.recordedAt < position.recordedAt }) ?? true {
                courier.latest = Entry(position: position, receivedAt: now, fromCourier: false)
            }
            couriers[courierId] = courier
        }
    }

    package func latest(_ courierId: String) -> Entry? { couriers.withLock { $0[courierId]?.latest } }

    /// The courier's average speed over their recent track, if they covered some ground over at least 20 s.
    package func learnedSpeed(_ courierId: String) -> Double? {
        couriers.withLock { couriers in
            guard let track = couriers[courierId]?.track, let first = track.first, let last = track.last else {
                return nil
            }
            let seconds = last.recordedAt.timeIntervalSince(first.recordedAt)
            guard seconds >= 20 else { return nil }
            var meters = 0.0
            for (from, to) in zip(track, track.dropFirst()) { meters += from.point.meters(to: to.point) }
            return meters > 50 ? meters / seconds : nil
        }
    }

    /// Forgets couriers not heard of since `cutoff`, so the book does not grow without bound.
    package func forget(before cutoff: Date) {
        couriers.withLock { couriers in
            couriers = couriers.filter { ($0.value.latest?.receivedAt ?? .distantPast) >= cutoff }
        }
    }
}

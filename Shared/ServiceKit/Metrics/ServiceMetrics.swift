import CoreMetrics
import Metrics
import Prometheus
import Synchronization

/// Process-wide metrics: swift-metrics backed by one Prometheus registry, served on `/metrics`.
package enum ServiceMetrics {
    private static let state = Mutex<PrometheusCollectorRegistry?>(nil)

    /// Bootstraps swift-metrics once per process and returns the registry.
    @discardableResult
    package static func bootstrap() -> PrometheusCollectorRegistry {
        state.withLock { registry in
            if let registry { return registry }
            let created = PrometheusCollectorRegistry()
            var factory = PrometheusMetricsFactory(registry: created)
            factory.defaultDurationHistogramBuckets = [
                .milliseconds(1), .milliseconds(2), .milliseconds(5), .milliseconds(10), .milliseconds(25),
                .milliseconds(50), .milliseconds(100), .milliseconds(250), .milliseconds(500), .seconds(1),
                .milliseconds(2500), .seconds(5),
            ]
            MetricsSystem.bootstrap(factory)
            registry = created
            return created
        }
    }

    /// The Prometheus text exposition of every metric.
    package static func exposition() -> String {
        let registry = bootstrap()
        var buffer: [UInt8] = []
        buffer.reserveCapacity(16_384)
        registry.emit(into: &buffer)
        return String(decoding: buffer, as: UTF8.self)
    }
}

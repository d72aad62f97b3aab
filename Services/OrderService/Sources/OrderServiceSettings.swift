import ServiceKit

/// The order service's own settings.
package struct OrderServiceSettings: Sendable {
    /// `PROOF_PHOTO_MAX_BYTES`, default 5 MiB.
    package var proofPhotoMaxBytes: Int
    /// `SAGA_STEP_TIMEOUT_SECONDS`, default 30: a pickup step not reported by then is republished.
    package var sagaStepTimeout: Duration
    /// `SAGA_CHECK_INTERVAL_MS`, default 5000.
    package var sagaCheckInterval: Duration
    /// `SAGA_MAX_REPUBLISHES`, default 10: a saga whose steps still have not reported after this many republishes
    /// ends failed (shown to admins) and is left alone.
    package var sagaMaximumRepublishes: Int

    package init(environment: ServiceEnvironment) throws(ConfigurationError) {
        proofPhotoMaxBytes = try environment.int("PROOF_PHOTO_MAX_BYTES", default: 5 << 20, in: 1_024...(50 << 20))
        sagaStepTimeout = try environment.seconds("SAGA_STEP_TIMEOUT_SECONDS", default: .seconds(30), in: 1...86_400)
        sagaCheckInterval = try environment.milliseconds(
            "SAGA_CHECK_INTERVAL_MS", default: .seconds(5), in: 100...3_600_000)
        sagaMaximumRepublishes = try environment.int("SAGA_MAX_REPUBLISHES", default: 10, in: 0...1000)
    }
}

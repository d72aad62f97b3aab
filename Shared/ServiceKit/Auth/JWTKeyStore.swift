import AsyncHTTPClient
import Foundation
import Logging
import NIOCore
import NIOFoundationCompat
import Synchronization

/// The verification keys in use. Keys from a JWKS URL are fetched again every refresh interval (by the job from
/// ``refreshJob(every:)``) and when a token names an unknown `kid`; such fetches start at most once per
/// `minimumRefetchInterval` and concurrent misses wait for the one fetch under way, so a flood of tokens with
/// random `kid`s cannot hammer the identity provider. A failed fetch keeps the keys held and logs a warning.
final class JWTKeyStore: Sendable {
    /// Where a key set is fetched from again.
    struct Remote: Sendable {
        var url: URL
        var httpClient: HTTPClient
        var minimumRefetchInterval: Duration
        var logger: Logger
    }

    /// The most requests waiting at once for a fetch; more are refused as naming an unknown key.
    static let maximumWaiting = 1024

    private struct State {
        var keys: VerificationKeySet
        /// The key set document `keys` were read from (none for fixed keys): one fetched again unchanged changes
        /// nothing.
        var document: [UInt8]?
        /// Counts the key sets held: a token verified with an earlier one is verified again.
        var generation = 0
        var lastFetchStarted: Date?
        /// Non-nil while a fetch is under way: who waits for it.
        var waiting: [CheckedContinuation<Void, Never>]?
    }

    private enum Lookup {
        case found(VerificationKeySet)
        case unknown
        case fetch
        case wait
    }

    private let state: Mutex<State>
    private let remote: Remote?
    private let now: @Sendable () -> Date

    /// Keys that never change (a PEM file, a JWKS file).
    init(fixed keys: VerificationKeySet, now: @escaping @Sendable () -> Date) {
        self.state = Mutex(State(keys: keys))
        self.remote = nil
        self.now = now
    }

    /// Fetches the key set at `remote.url` once.
    /// - Throws: ``ConfigurationError`` naming `JWT_JWKS_URL` when it cannot be fetched or holds no usable key.
    init(remote: Remote, now: @escaping @Sendable () -> Date) async throws(ConfigurationError) {
        let started = now()
        let (keys, document) = try await Self.fetch(remote)
        self.state = Mutex(State(keys: keys, document: document, lastFetchStarted: started))
        self.remote = remote
        self.now = now
        remote.logger.info(
            "loaded the JSON Web Key Set",
            metadata: ["jwt.jwks_url": "\(remote.url)", "jwt.kids": "\(keys.identifiers?.sorted() ?? [])"]
        )
    }

    /// Which key set is held: it changes whenever a fetched key set differs from the one held.
    var generation: Int { state.withLock { $0.generation } }

    /// The keys to verify a token naming `kid` with, or nil when none of the issuer's keys has that `kid` (after
    /// fetching the key set again if allowed).
    func keys(for kid: String?) async -> VerificationKeySet? {
        let lookup = state.withLock { state -> Lookup in
            if state.keys.holds(kid) { return .found(state.keys) }
            guard let remote, kid != nil else { return .unknown }
            if state.waiting != nil { return .wait }
            let started = now()
            if let last = state.lastFetchStarted {
                let elapsed = started.timeIntervalSince(last)
                if elapsed >= 0, elapsed < remote.minimumRefetchInterval.timeInterval { return .unknown }
            }
            state.waiting = []
            state.lastFetchStarted = started
            return .fetch
        }
        switch lookup {
        case .found(let keys): return keys
        case .unknown: return nil
        case .fetch: await fetchAndReplace(reason: "a token names an unknown kid")
        case .wait: await waitForFetch()
        }
        return state.withLock { $0.keys.holds(kid) ? $0.keys : nil }
    }

    /// Fetches the key set again now, unless a fetch is under way. Does nothing for fixed keys.
    func refresh() async {
        guard remote != nil else { return }
        let fetching = state.withLock { state -> Bool in
            guard state.waiting == nil else { return false }
            state.waiting = []
            state.lastFetchStarted = now()
            return true
        }
        if fetching { await fetchAndReplace(reason: "periodic refresh") }
    }

    /// The job that refreshes a JWKS URL's keys every `interval`; nil for fixed keys.
    func refreshJob(every interval: Duration) -> PeriodicJob? {
        guard let remote else { return nil }
        return PeriodicJob(every: interval, failure: "could not refresh the JSON Web Key Set", logger: remote.logger) {
            [self] in await refresh()
        }
    }

    private func fetchAndReplace(reason: String) async {
        guard let remote else { return }
        var fetched: (keys: VerificationKeySet, document: [UInt8])?
        do {
            fetched = try await Self.fetch(remote)
            remote.logger.info(
                "refreshed the JSON Web Key Set",
                metadata: [
                    "jwt.jwks_url": "\(remote.url)", "jwt.kids": "\(fetched?.keys.identifiers?.sorted() ?? [])",
                    "jwt.reason": "\(reason)",
                ]
            )
        } catch {
            remote.logger.warning(
                "could not refresh the JSON Web Key Set; keeping the keys held",
                metadata: ["jwt.jwks_url": "\(remote.url)", "jwt.reason": "\(reason)", "error": "\(error)"]
            )
        }
        let waiting = state.withLock { state in
            if let fetched, fetched.document != state.document {
                state.keys = fetched.keys
                state.document = fetched.document
                state.generation += 1
            }
            defer { state.waiting = nil }
            return state.waiting ?? []
        }
        for continuation in waiting { continuation.resume() }
    }

    private func waitForFetch() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let queued = state.withLock { state -> Bool in
                guard let waiting = state.waiting, waiting.count < Self.maximumWaiting else { return false }
                state.waiting!.append(continuation)
                return true
            }
            if !queued { continuation.resume() }
        }
    }

    /// The key set at `remote.url`, and the document it was read from.
    private static func fetch(_ remote: Remote) async throws(ConfigurationError) -> (
        keys: VerificationKeySet, document: [UInt8]
    ) {
        let body: ByteBuffer
        do {
            var request = HTTPClientRequest(url: remote.url.absoluteString)
            request.headers.add(name: "Accept", value: "application/json")
            let response = try await remote.httpClient.execute(request, timeout: .seconds(10))
            guard response.status == .ok else {
                throw ConfigurationError(variable: "JWT_JWKS_URL", problem: "\(remote.url) answered \(response.status)")
            }
            body = try await response.body.collect(upTo: 1 << 20)
        } catch let error as ConfigurationError {
            throw error
        } catch {
            throw ConfigurationError(variable: "JWT_JWKS_URL", problem: "cannot fetch \(remote.url): \(error)")
        }
        let keys = try await VerificationKeySet.keySet(
            json: body.readableBytesView, origin: remote.url.absoluteString, variable: "JWT_JWKS_URL",
            logger: remote.logger)
        return (keys, Array(body.readableBytesView))
    }
}

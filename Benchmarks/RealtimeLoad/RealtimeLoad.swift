import ArgumentParser
import Foundation
import LoadKit
import Synchronization

/// A load generator that speaks the raw Socket.IO protocol over WebSocket to the conformance server: it holds
/// many connections, measures the server's resident memory per connection, and the `message` -> `message-back`
/// round trip at given rates.
@main
struct RealtimeLoad: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "realtime-load", abstract: "Socket.IO load generator (raw protocol over WebSocket)."
    )

    @Option(help: "The server's Socket.IO endpoint.")
    var url = "ws://127.0.0.1:3000/socket.io/?EIO=4&transport=websocket"

    @Option(help: "Concurrent connections to open and hold.")
    var connections = 10_000

    @Option(help: "Connections opened at once while ramping up.")
    var connectBatch = 250

    @Option(parsing: .upToNextOption, help: "Message rates to measure, messages per second, in order.")
    var rates: [Int] = [10_000]

    @Option(help: "Seconds per rate.")
    var seconds = 20

    @Option(help: "The server's process id, to read its resident memory.")
    var serverPid: Int32?

    @Option(help: "Stop stepping up rates once p99 exceeds this many milliseconds.")
    var saturationMilliseconds = 100.0

    func run() async throws {
        _ = LoadClock.origin
        let recorder = LatencySamples()
        let connectTimes = LatencySamples()
        let pool = ConnectionPool()
        let overflowsBefore = listenOverflows()
        let start = ContinuousClock.now
        let baselineRSS = serverPid.flatMap(MachineCPU.residentKilobytes)
        let connectCPU = CPUMeter(serverPid: serverPid)

        guard let endpoint = LoadSocket.Endpoint(url: url) else {
            throw ValidationError("--url must be ws://HOST:PORT/PATH")
        }
        var opened = 0
        while opened < connections {
            let batch = min(connectBatch, connections - opened)
            let ready = AsyncStream<Bool>.makeStream()
            let continuation = ready.continuation
            for _ in 0..<batch {
                let startedAt = ContinuousClock.now
                let handlers = LoadSocket.Handlers(
                    connected: { socket, _, _ in
                        pool.add(socket)
                        connectTimes.add(since: startedAt)
                        continuation.yield(true)
                    },
                    packet: { _, text in
                        guard text.hasPrefix(#"42["message-back""#), let range = text.range(of: #""s":"#) else {
                            return
                        }
                        if let sentAt = Int64(text[range.upperBound...].prefix { $0.isNumber }) {
                            recorder.add(LoadClock.milliseconds(since: sentAt), sentAt: Double(sentAt) / 1e9)
                        }
                    },
                    ended: { connected in
                        if connected { pool.connectionLost() } else { continuation.yield(false) }
                    }
                )
                LoadSocket.open(endpoint, namespace: "/", auth: nil, handlers: handlers)
            }
            var established = 0
            for await success in ready.stream {
                established += 1
                if !success { print("a connection failed") }
                if established == batch { break }
            }
            opened += batch
        }
        let connectSeconds = (ContinuousClock.now - start).seconds
        let connectCost = connectCPU.used()
        try await Task.sleep(for: .seconds(2))
        print("connections: \(pool.count) open (of \(connections)) in \(String(format: "%.1f", connectSeconds)) s")
        print(connectCost.report(per: Double(max(pool.count, 1)), unit: "a connection"))
        print("each connection, from its TCP connect to the Socket.IO CONNECT answer: \(connectTimes.summary())")
        if let before = overflowsBefore, let after = listenOverflows() {
            print("listen queue overflows while opening (TcpExt ListenOverflows): \(after - before)")
        }
        if let pid = serverPid, let baselineRSS, let loadedRSS = MachineCPU.residentKilobytes(pid) {
            let perConnection = Double(loadedRSS - baselineRSS) * 1024 / Double(max(pool.count, 1))
            print(
                "server resident memory: \(baselineRSS / 1024) MiB idle, \(loadedRSS / 1024) MiB loaded, \(String(format: "%.1f", perConnection / 1024)) KiB per connection"
            )
        }

        for rate in rates {
            recorder.reset()
            let rateCPU = CPUMeter(serverPid: serverPid)
            let sendingBegan = HostEpisodes.now()
            let sent = try await pool.send(rate: rate, seconds: seconds)
            try await Task.sleep(for: .seconds(1))
            let rateCost = rateCPU.used()
            let received = recorder.count
            if pool.lostCount > 0 { print("connections closed by the server so far: \(pool.lostCount)") }
            print(
                "rate \(rate)/s: sent \(sent), received \(received) (\(String(format: "%.0f", Double(received) / Double(seconds)))/s), "
                    + recorder.summary()
            )
            print("  " + rateCost.report(per: Double(max(sent, 1)) / 1000, unit: "per 1,000 messages"))
            let sending = sendingBegan...(sendingBegan + Double(seconds))
            if let report = recorder.hostEpisodesReport("round trips", window: sending) { print("  " + report) }
            if recorder.percentile(0.99) ?? .infinity > saturationMilliseconds || received < sent * 95 / 100 {
                print("saturated at \(rate)/s (p99 over \(saturationMilliseconds) ms or messages lost)")
                break
            }
        }
        pool.closeAll()
    }
}

/// The CPU time the server and this generator use from its creation on, from /proc.
struct CPUMeter {
    let serverPid: Int32?
    let serverStart: Double?
    let generatorStart: Double?
    let wallStart = ContinuousClock.now

    init(serverPid: Int32?) {
        self.serverPid = serverPid
        serverStart = serverPid.flatMap { cpuSeconds("/proc/\($0)/stat") }
        generatorStart = cpuSeconds("/proc/self/stat")
    }

    /// What each used since.
    func used() -> CPUCost {
        let server = serverPid.flatMap { cpuSeconds("/proc/\($0)/stat") }.flatMap { now in serverStart.map { now - $0 }
        }
        let generator = cpuSeconds("/proc/self/stat").flatMap { now in generatorStart.map { now - $0 } }
        return CPUCost(server: server, generator: generator, wall: (ContinuousClock.now - wallStart).seconds)
    }
}

/// CPU seconds the server and the generator used over `wall` seconds.
struct CPUCost {
    var server: Double?
    var generator: Double?
    var wall: Double

    /// E.g. `server CPU 0.31 ms a connection (3.1 s, 110% of a core); generator 95% of a core`.
    func report(per count: Double, unit: String) -> String {
        func share(_ seconds: Double) -> String { String(format: "%.0f%% of a core", seconds * 100 / max(wall, 0.001)) }
        var parts: [String] = []
        if let server {
            let each = String(format: "%.3f", server * 1000 / count)
            parts.append("server CPU \(each) ms \(unit) (\(String(format: "%.2f", server)) s, \(share(server)))")
        }
        if let generator { parts.append("generator " + share(generator)) }
        return parts.joined(separator: "; ")
    }
}

/// User plus system CPU seconds of the process whose `stat` file is at `path`.
func cpuSeconds(_ path: String) -> Double? { MachineCPU.usage(path)?.seconds }

/// How many connections the kernel dropped for a full listen queue so far (`TcpExt ListenOverflows` in
/// /proc/net/netstat, this network namespace's).
func listenOverflows() -> Int? {
    guard let text = try? String(contentsOfFile: "/proc/net/netstat", encoding: .utf8) else { return nil }
    let lines = text.split(separator: "\n")
    for (index, line) in lines.enumerated() where line.hasPrefix("TcpExt:") && index + 1 < lines.count {
        let names = line.split(separator: " ")
        let values = lines[index + 1].split(separator: " ")
        guard let position = names.firstIndex(of: "ListenOverflows"), position < values.count else { return nil }
        return Int(values[position])
    }
    return nil
}

extension Duration {
    var seconds: Double { Double(components.seconds) + Double(components.attoseconds) / 1e18 }
}

/// The open connections; sends round-robin at a rate.
final class ConnectionPool: Sendable {
    private let sockets = Mutex<[LoadSocket]>([])
    private let lost = Atomic<Int>(0)

    var count: Int { sockets.withLock { $0.count } }

    /// Connections the server closed after they were established.
    var lostCount: Int { lost.load(ordering: .relaxed) }

    func connectionLost() { lost.add(1, ordering: .relaxed) }

    func add(_ socket: LoadSocket) { sockets.withLock { $0.append(socket) } }

    func closeAll() { sockets.withLock { $0.forEach { $0.close() } } }

    /// Sends `rate` messages a second for `seconds`, spread in 10 ms ticks. Returns how many were sent.
    func send(rate: Int, seconds: Int) async throws -> Int {
        let targets = sockets.withLock { $0 }
        guard !targets.isEmpty else { return 0 }
        let ticks = seconds * 100
        var next = 0
        var sent = 0
        let clock = ContinuousClock()
        var deadline = clock.now
        for tick in 0..<ticks {
            let due = rate * (tick + 1) / 100 - rate * tick / 100
            for _ in 0..<due {
                targets[next % targets.count].send(#"42["message",{"s":\#(LoadClock.nanoseconds())}]"#)
                next += 1
                sent += 1
            }
            deadline = deadline.advanced(by: .milliseconds(10))
            try await Task.sleep(until: deadline, clock: clock)
        }
        return sent
    }
}

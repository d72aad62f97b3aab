import Dispatch
import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// A child process started with `posix_spawn`, its output captured in a file. Used instead of Foundation's
/// `Process`, whose `waitUntilExit` spins a CPU at 100% on Linux when called off the main thread.
package final class ChildProcess: @unchecked Sendable {
    // @unchecked: `pid` and `status` are only touched by the test that owns the process, sequentially.
    package let pid: pid_t
    package let outputFile: URL
    private var status: Int32?

    /// Starts `executable` with `arguments` and exactly `environment`; stdout and stderr go to one file.
    package init(executable: String, arguments: [String], environment: [String: String]? = nil) throws {
        outputFile = FileManager.default.temporaryDirectory.appendingPathComponent("child-\(UUID().uuidString).log")
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 1, outputFile.path, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        // Nothing else of the test process (its servers' listening sockets above all) leaks into the child: a
        // broker outliving a test would otherwise keep that test's port bound.
        // (glibc 2.34's posix_spawn_file_actions_addclosefrom_np, which Swift's Glibc module does not export.)
        typealias AddCloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>?, Int32) -> Int32
        if let symbol = dlsym(nil, "posix_spawn_file_actions_addclosefrom_np") {
            _ = unsafeBitCast(symbol, to: AddCloseFrom.self)(&actions, 3)
        }

        // The spawning thread may block signals (dispatch's threads do); the child must not inherit that.
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var noSignals = sigset_t()
        sigemptyset(&noSignals)
        posix_spawnattr_setsigmask(&attributes, &noSignals)
        var allSignals = sigset_t()
        sigfillset(&allSignals)
        posix_spawnattr_setsigdefault(&attributes, &allSignals)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))

        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        let environmentValues = environment ?? ProcessInfo.processInfo.environment
        let envp = environmentValues.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { envp.forEach { free($0) } }

        var pid: pid_t = 0
        let result = posix_spawn(&pid, executable, &actions, &attributes, argv, envp)
        guard result == 0 else {
            throw POSIXError(POSIXErrorCode(rawValue: result) ?? .EINVAL)
        }
        self.pid = pid
        LiveChildren.shared.add(pid)
    }

    /// Waits for the process to end and returns its exit status (128 + signal if killed by one).
    @discardableResult
    package func wait() -> Int32 {
        if let status { return status }
        var raw: Int32 = 0
        while waitpid(pid, &raw, 0) == -1, errno == EINTR {}
        let exitStatus = (raw & 0x7f) == 0 ? (raw >> 8) & 0xff : 128 + (raw & 0x7f)
        status = exitStatus
        LiveChildren.shared.remove(pid)
        return exitStatus
    }

    /// Waits for the process to end on a thread of its own: never on the cooperative pool (which in-process
    /// servers under test need) nor on GCD's global queues (as narrow as the machine on Linux).
    package func exitStatus() async -> Int32 {
        await withCheckedContinuation { continuation in
            Thread { continuation.resume(returning: self.wait()) }.start()
        }
    }

    /// Sends `signal` and waits for the process to end.
    package func stop(signal: Int32 = SIGTERM) {
        guard status == nil else { return }
        kill(pid, signal)
        wait()
    }

    /// Everything the process wrote so far.
    package var output: String {
        (try? String(contentsOf: outputFile, encoding: .utf8)) ?? ""
    }

    deinit {
        stop(signal: SIGKILL)
        try? FileManager.default.removeItem(at: outputFile)
    }
}

/// The children still running, killed once the test process is gone: a broker or service a suite shares lives as long
/// as the process, and would otherwise outlive it (six Tansu brokers were left behind by every `swift test`).
private final class LiveChildren: Sendable {
    static let shared = LiveChildren()
    private let pids = Mutex<Set<pid_t>>([])

    private init() {
        atexit { LiveChildren.shared.killAll() }
    }

    func add(_ pid: pid_t) { pids.withLock { _ = $0.insert(pid) } }

    func remove(_ pid: pid_t) { pids.withLock { _ = $0.remove(pid) } }

    /// Has a watcher kill the children once this process is gone. Killed from this `atexit` handler, the brokers
    /// went down while the services still running here followed them, and their librdkafka threads logged and
    /// reconnected while exit() tore the process down: twice (once in CI) the process then crashed ("double free or
    /// corruption") after every test had passed. If the watcher cannot start, the children are killed now.
    private func killAll() {
        let children = pids.withLock { $0 }
        guard !children.isEmpty else { return }
        let script = #"while kill -0 "$0" 2>/dev/null; do sleep 0.1; done; kill -9 "$@" 2>/dev/null"#
        do {
            let watcher = try ChildProcess(
                executable: "/bin/sh", arguments: ["-c", script, String(getpid())] + children.map { String($0) },
                environment: ["PATH": "/usr/bin:/bin"])
            // Never released: releasing it would kill the watcher (`deinit`).
            _ = Unmanaged.passRetained(watcher)
        } catch {
            for pid in children { kill(pid, SIGKILL) }
        }
    }
}

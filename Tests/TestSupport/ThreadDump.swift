import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// Every thread's backtrace in this process, from gdb attached to it (empty if gdb is missing or cannot attach):
/// what a test that overran a deadline prints, so a hang that shows once in many runs leaves its cause behind.
package func threadBacktraces() async -> String {
    guard let gdb = ["/usr/bin/gdb", "/usr/local/bin/gdb"].first(where: FileManager.default.isExecutableFile)
    else { return "" }
    guard
        let dump = try? ChildProcess(
            executable: gdb, arguments: ["-p", String(getpid()), "-batch", "-nx", "-ex", "thread apply all bt 30"])
    else { return "" }
    // On a loaded machine gdb took nine minutes over a debug test binary's symbols, and the test waiting for it
    // overran its time limit instead of failing with what overran: a minute, then what it wrote so far.
    let deadline = Task {
        try await Task.sleep(for: .seconds(60))
        kill(dump.pid, SIGKILL)
    }
    _ = await dump.exitStatus()
    deadline.cancel()
    return dump.output
}

/// A fixture's graceful shutdown took longer than it may.
package struct ShutdownOverran: Error, CustomStringConvertible {
    package let limit: Duration
    package var description: String { "graceful shutdown took longer than \(limit); the threads were dumped to stderr" }
}

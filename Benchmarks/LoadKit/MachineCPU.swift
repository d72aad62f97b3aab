import Foundation

/// The CPU time of every process on the machine by command name, from /proc, to say who used the cores over a
/// window: `let before = MachineCPU.snapshot()`, the load, then `MachineCPU.report(since: before, over: wall)`.
package enum MachineCPU {
    /// User plus system CPU seconds of each command (the kernel's 15-character name), summed over its processes.
    /// Kernel threads are left out: their names change with the work they take.
    package static func snapshot() -> [String: Double] {
        var seconds: [String: Double] = [:]
        let pids = (try? FileManager.default.contentsOfDirectory(atPath: "/proc"))?.filter { $0.allSatisfy(\.isNumber) }
        for pid in pids ?? [] where pid != "2" {
            guard let usage = usage("/proc/\(pid)/stat"), usage.parent != 2 else { continue }
            seconds[usage.command, default: 0] += usage.seconds
        }
        return seconds
    }

    /// The commands that used the most CPU since `before`, over `wall`, as shares of one core: "postgres 41%, …".
    package static func report(since before: [String: Double], over wall: Duration, top: Int = 6) -> String {
        let window = max(Double(wall.components.seconds) + Double(wall.components.attoseconds) / 1e18, 0.001)
        let used = snapshot().map { (command: $0.key, seconds: max(0, $0.value - (before[$0.key] ?? 0))) }
        let busiest = used.filter { $0.seconds > 0 }.sorted { $0.seconds > $1.seconds }.prefix(top)
        let total = used.reduce(0) { $0 + $1.seconds }
        let shares = busiest.map { "\($0.command) \(String(format: "%.0f", $0.seconds * 100 / window))%" }
        return "CPU, one core = 100%: \(shares.joined(separator: ", ")); the machine "
            + String(format: "%.0f%%", total * 100 / window)
    }

    /// The command name, the parent's pid and the user plus system CPU seconds of the process whose `stat` file is
    /// at `path`.
    package static func usage(_ path: String) -> (command: String, parent: Int, seconds: Double)? {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8),
            let open = text.firstIndex(of: "("), let close = text.lastIndex(of: ")")
        else { return nil }
        // Fields after the command name: state is the 3rd field of the file, the parent the 4th, utime the 14th and
        // stime the 15th.
        let fields = text[text.index(after: close)...].split(separator: " ")
        guard fields.count > 12, let parent = Int(fields[1]), let user = Double(fields[11]),
            let system = Double(fields[12])
        else { return nil }
        let command = String(text[text.index(after: open)..<close])
        return (command, parent, (user + system) / Double(sysconf(Int32(_SC_CLK_TCK))))
    }

    /// The resident memory of process `pid` in KiB (`VmRSS` in /proc), or nil when it is gone.
    package static func residentKilobytes(_ pid: Int32) -> Int? {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return nil }
        for line in text.split(separator: "\n") where line.hasPrefix("VmRSS:") {
            return Int(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "")
        }
        return nil
    }
}

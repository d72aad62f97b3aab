#if canImport(Glibc)
    @preconcurrency import Glibc
#endif

/// The load generators' output.
package enum LoadOutput {
    /// Each line goes out as it is printed, also into a file: a script that waits for a phase's line (to sample
    /// the processes' CPU then) sees it when it happens, not when the buffer fills. Called once, before anything
    /// prints.
    package static func lineBuffered() {
        setvbuf(stdout, nil, _IOLBF, 0)
    }
}

import Foundation

/// The parsers' fuzzing driver. Built with `-DFUZZING` (see deploy/local/fuzz.sh) it hands control to libFuzzer
/// for the target named by `FUZZ_TARGET`; built normally it replays inputs through the same targets:
///   fuzz-parsers <target> <file or directory>...   every input given
///   fuzz-parsers all <corpus root>                 <root>/<target>/* for every target
@main
struct FuzzParsers {
    static func main() {
        #if FUZZING
            runLibFuzzer()
        #else
            exit(replay(Array(CommandLine.arguments.dropFirst())))
        #endif
    }

    /// Replays the inputs named by `arguments`; the exit status (1 on a failure or a usage error).
    static func replay(_ arguments: [String]) -> Int32 {
        guard let name = arguments.first, arguments.count >= 2 else {
            let names = FuzzTarget.allCases.map(\.rawValue).joined(separator: ", ")
            print(
                "usage: fuzz-parsers <target> <file or directory>... | fuzz-parsers all <corpus root>; targets: \(names)"
            )
            return 1
        }
        let runs: [(FuzzTarget, [String])]
        if name == "all" {
            runs = FuzzTarget.allCases.map { ($0, [arguments[1] + "/" + $0.rawValue]) }
        } else if let target = FuzzTarget(rawValue: name) {
            runs = [(target, Array(arguments.dropFirst()))]
        } else {
            print("unknown target \(name)")
            return 1
        }
        var failed = false
        for (target, paths) in runs {
            let files = paths.flatMap(inputFiles)
            for file in files {
                do throws(FuzzFailure) {
                    try target.run(Array(FileManager.default.contents(atPath: file) ?? Data()))
                } catch {
                    print("\(target.rawValue): \(file): \(error)")
                    failed = true
                }
            }
            print("\(target.rawValue): \(files.count) inputs replayed")
        }
        return failed ? 1 : 0
    }

    /// The file at `path`, or the files directly inside the directory at `path`, sorted.
    static func inputFiles(_ path: String) -> [String] {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else { return [] }
        guard isDirectory.boolValue else { return [path] }
        let names = (try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []
        return names.filter { !$0.hasPrefix(".") }.sorted().map { path + "/" + $0 }
    }
}

#if FUZZING
    /// libFuzzer's entry point when the program keeps its own `main` (its runtime is linked without one).
    @_extern(c, "LLVMFuzzerRunDriver")
    func llvmFuzzerRunDriver(
        _ argc: UnsafeMutablePointer<Int32>,
        _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>,
        _ testOneInput: @convention(c) (UnsafePointer<UInt8>?, Int) -> Int32
    ) -> Int32

    /// The target `FUZZ_TARGET` names; read once, before libFuzzer starts.
    nonisolated(unsafe) private var selectedTarget = FuzzTarget.json

    extension FuzzParsers {
        static func runLibFuzzer() {
            let name = ProcessInfo.processInfo.environment["FUZZ_TARGET"] ?? ""
            guard let target = FuzzTarget(rawValue: name) else {
                let names = FuzzTarget.allCases.map(\.rawValue).joined(separator: ", ")
                print("set FUZZ_TARGET to one of: \(names)")
                exit(2)
            }
            selectedTarget = target
            var argc = CommandLine.argc
            var argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = CommandLine.unsafeArgv
            exit(
                llvmFuzzerRunDriver(&argc, &argv) { data, size in
                    let bytes = data.map { Array(UnsafeBufferPointer(start: $0, count: size)) } ?? []
                    do throws(FuzzFailure) {
                        try selectedTarget.run(bytes)
                    } catch {
                        fatalError("\(selectedTarget.rawValue): \(error)")
                    }
                    return 0
                })
        }
    }
#endif

import Foundation

/// A start-up configuration problem, naming the environment variable at fault.
package struct ConfigurationError: Error, CustomStringConvertible, Equatable {
    package var variable: String
    package var problem: String
    package init(variable: String, problem: String) {
        self.variable = variable
        self.problem = problem
    }
    package var description: String { "\(variable): \(problem)" }
}

/// Typed access to environment variables, with errors that name the variable and say what was expected.
/// The only place configuration is read from the process environment.
package struct ServiceEnvironment: Sendable {
    package var values: [String: String]

    /// The process environment.
    package static var process: ServiceEnvironment { ServiceEnvironment(ProcessInfo.processInfo.environment) }

    package init(_ values: [String: String]) { self.values = values }

    /// A value that may be absent; empty counts as absent.
    package func optional(_ name: String) -> String? {
        guard let value = values[name]?.trimmingCharacters(in: .whitespaces), !value.isEmpty else { return nil }
        return value
    }

    /// A value that must be present.
    /// - Parameter meaning: what the variable holds, with an example, for the error message.
    package func required(_ name: String, meaning: String) throws(ConfigurationError) -> String {
        guard let value = optional(name) else {
            throw ConfigurationError(variable: name, problem: "required but not set (\(meaning))")
        }
        return value
    }

    package func int(_ name: String, default defaultValue: Int, in range: ClosedRange<Int>) throws(ConfigurationError)
        -> Int
    {
        guard let text = optional(name) else { return defaultValue }
        guard let value = Int(text), range.contains(value) else {
            throw ConfigurationError(
                variable: name,
                problem: "'\(text)' is not a whole number from \(range.lowerBound) to \(range.upperBound)"
            )
        }
        return value
    }

    package func double(_ name: String, default defaultValue: Double, in range: ClosedRange<Double>)
        throws(ConfigurationError) -> Double
    {
        guard let text = optional(name) else { return defaultValue }
        guard let value = Double(text), range.contains(value) else {
            throw ConfigurationError(
                variable: name, problem: "'\(text)' is not a number from \(range.lowerBound) to \(range.upperBound)"
            )
        }
        return value
    }

    /// A duration given in milliseconds, e.g. `OUTBOX_POLL_INTERVAL_MS=1000`.
    package func milliseconds(_ name: String, default defaultValue: Duration, in range: ClosedRange<Int>)
        throws(ConfigurationError) -> Duration
    {
        guard optional(name) != nil else { return defaultValue }
        return .milliseconds(try int(name, default: 0, in: range))
    }

    /// A duration given in seconds, e.g. `OFFER_TIMEOUT_SECONDS=60`.
    package func seconds(_ name: String, default defaultValue: Duration, in range: ClosedRange<Int>)
        throws(ConfigurationError) -> Duration
    {
        guard optional(name) != nil else { return defaultValue }
        return .seconds(try int(name, default: 0, in: range))
    }

    package func bool(_ name: String, default defaultValue: Bool) throws(ConfigurationError) -> Bool {
        guard let text = optional(name)?.lowercased() else { return defaultValue }
        switch text {
        case "1", "true", "yes", "on": return true
        case "0", "false", "no", "off": return false
        default: throw ConfigurationError(variable: name, problem: "'\(text)' is not true or false")
        }
    }

    /// One of a fixed set of values.
    package func choice<T: RawRepresentable & CaseIterable>(_ name: String, default defaultValue: T)
        throws(ConfigurationError) -> T where T.RawValue == String
    {
        guard let text = optional(name) else { return defaultValue }
        guard let value = T(rawValue: text.lowercased()) ?? T(rawValue: text) else {
            let allowed = T.allCases.map(\.rawValue).joined(separator: ", ")
            throw ConfigurationError(variable: name, problem: "'\(text)' is not one of \(allowed)")
        }
        return value
    }

    /// `key=value` pairs separated by semicolons (values may hold commas), e.g.
    /// `KAFKA_PROPERTIES=max.poll.interval.ms=300000;debug=broker,topic`.
    package func keyValuePairs(_ name: String) throws(ConfigurationError) -> [String: String] {
        guard let text = optional(name) else { return [:] }
        var pairs: [String: String] = [:]
        for item in text.split(separator: ";") where !item.trimmingCharacters(in: .whitespaces).isEmpty {
            let parts = item.split(separator: "=", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
            guard parts.count == 2, !parts[0].isEmpty else {
                throw ConfigurationError(variable: name, problem: "'\(item)' is not key=value")
            }
            pairs[parts[0]] = parts[1]
        }
        return pairs
    }

    /// An absolute URL with a scheme and a host.
    package func url(_ name: String, meaning: String) throws(ConfigurationError) -> URL? {
        guard let text = optional(name) else { return nil }
        guard let url = URL(string: text), url.scheme != nil, url.host != nil else {
            throw ConfigurationError(variable: name, problem: "'\(text)' is not a URL (\(meaning))")
        }
        return url
    }
}

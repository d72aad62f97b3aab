import Contracts
import Foundation
import Kafka
import Realtime
import RealtimeTesting
import ServiceKit
import ServiceLifecycle
import Synchronization

/// A value a whole suite shares, made on first use (a service under test: starting one per test would spend
/// seconds in consumer-group joins).
package final class SuiteShared<Value: Sendable>: Sendable {
    private let task = Mutex<Task<Value, any Error>?>(nil)
    private let make: @Sendable () async throws -> Value

    package init(_ make: @escaping @Sendable () async throws -> Value) { self.make = make }

    package func get() async throws -> Value {
        let task = task.withLock { task in
            if let task { return task }
            let created = Task { try await make() }
            task = created
            return created
        }
        return try await task.value
    }
}

/// Builds `Service` as its executable does, with `extra` settings in a fresh schema (and `brokers`, by default
/// the test broker) and the time from `now` (a ``SteppedClock``'s to test deadlines), runs it until the test
/// process ends, and returns a client once it is ready and every consumer has its partitions (Tansu takes a few
/// seconds to let a member join its group).
package func startSuiteService<Service: ServiceDefinition>(
    _ service: Service.Type, schema: String = uniqueName(Service.defaultSchema), brokers: String? = nil,
    extra: [String: String] = [:], now: Now = .system
) async throws -> ServiceClient {
    let environment = try testServiceEnvironment(schema: schema, brokers: brokers, extra: extra)
    let app = try await Service.buildApplication(
        configuration: try Service.configuration(environment: environment), environment: environment,
        logger: TestInfrastructure.logger(Service.name), now: now
    )
    let group = ServiceGroup(
        configuration: .init(services: app.services, gracefulShutdownSignals: [], logger: app.logger))
    Task { try await group.run() }
    let client = ServiceClient(port: app.port)
    try await eventually(timeout: .seconds(30), "\(Service.name) ready") {
        (try? await client.get("/ready").status) == 200
    }
    try await eventually(timeout: .seconds(30), "\(Service.name)'s consumers assigned their partitions") {
        app.consumers.allSatisfy(\.hasPartitions)
    }
    return client
}

/// A python scenario script that failed or printed no JSON.
package struct ScenarioFailed: Error, CustomStringConvertible {
    package var description: String
    package init(_ description: String) { self.description = description }
}

/// Runs the python scenario `script` (next to the calling test file) with `arguments`; returns the last JSON
/// object line it printed.
package func runPythonScenario(_ script: String, _ arguments: [String], callerFile: String = #filePath) async throws
    -> JSONValue
{
    let path = URL(fileURLWithPath: callerFile).deletingLastPathComponent().appendingPathComponent(script).path
    let process = try ChildProcess(executable: try TestInfrastructure.python(), arguments: [path] + arguments)
    let status = await process.exitStatus()
    guard status == 0, let line = process.output.split(separator: "\n").last(where: { $0.hasPrefix("{") }) else {
        throw ScenarioFailed("\(script) \(arguments.first ?? "") exited \(status): \(process.output)")
    }
    return try JSONValue.parse(String(line))
}

/// The events keyed `key` on `topic`, read from the start in a fresh consumer group, until `done` says so.
package func publishedEvents(
    on topic: Topic, key: String, brokers: String? = nil, timeout: Duration = .seconds(30),
    until done: @escaping @Sendable ([DecodedEvent]) -> Bool
) async throws -> [DecodedEvent] {
    let consumer = try KafkaConsumer(
        configuration: KafkaConsumerConfiguration(
            client: KafkaClientConfiguration(
                bootstrapServers: [try brokers ?? TestInfrastructure.kafkaBrokers()], clientId: "test-reader"),
            groupId: uniqueName("reader")
        ),
        topics: [topic.rawValue], logger: TestInfrastructure.logger("test-reader")
    )
    let events = try await withTimeout(timeout) {
        var events: [DecodedEvent] = []
        for try await message in consumer.messages where message.keyString == key {
            if let event = try? EventCatalog.decode(message.value) { events.append(event) }
            if done(events) { break }
        }
        return events
    }
    await consumer.close()
    return events
}

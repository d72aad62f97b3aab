import Foundation
import Kafka
import Realtime
import RealtimePlatform
import Synchronization
import TestSupport
import Testing

/// A starting instance reads the realtime log from the retention's start, not from the oldest record the broker
/// still keeps (Tansu never deletes; Kafka keeps whole segments), against the real broker.
@Suite("Kafka realtime log start", .serialized)
struct KafkaRealtimeLogTests {
    let client = KafkaClientConfiguration(
        bootstrapServers: [(try? TestInfrastructure.kafkaBrokers()) ?? "127.0.0.1:1"], clientId: "realtime-log-tests")
    let logger = TestInfrastructure.logger("realtime-log-start")

    @Test("an instance starts at the first record stamped within the retention")
    func startsWithinRetention() async throws {
        let topic = uniqueName("realtime-start")
        let producer = try await makeTopic(topic)
        let writer = log(topic, producer: producer, now: Date.init)
        try await appendWithDistinctStamps(["old", "kept"], to: writer)
        let stamps = try await stampsOfRecords(in: topic, count: 2)
        let retention = Duration.seconds(60)
        let reader = log(topic, producer: producer, now: { stamps[1].addingTimeInterval(60) }, retention: retention)
        let applied = try await origins(readBy: reader, until: "later") {
            try await writer.append([Self.marker("later")])
        }
        #expect(applied == ["kept", "later"])
        await producer.close()
    }

    @Test("an instance whose retention starts after the last record reads only what comes after it")
    func startsAtTheEndWhenEverythingIsOlder() async throws {
        let topic = uniqueName("realtime-start")
        let producer = try await makeTopic(topic)
        let writer = log(topic, producer: producer, now: Date.init)
        try await writer.append([Self.marker("first"), Self.marker("second")])
        let reader = log(topic, producer: producer, now: { Date().addingTimeInterval(3_600) })
        let applied = try await origins(readBy: reader, until: "after start") {
            try await writer.append([Self.marker("after start")])
        }
        #expect(applied == ["after start"])
        await producer.close()
    }

    private static func marker(_ origin: String) -> RealtimeRecord {
        RealtimeRecord(origin: origin, namespace: "/", at: Date())
    }

    private func makeTopic(_ topic: String) async throws -> KafkaProducer {
        try await KafkaAdmin.createTopics(
            [KafkaTopicSpecification(name: topic, partitions: 1)], client: client, logger: logger)
        return try KafkaProducer(configuration: KafkaProducerConfiguration(client: client), logger: logger)
    }

    private func log(
        _ topic: String, producer: KafkaProducer, now: @escaping @Sendable () -> Date,
        retention: Duration = .seconds(60)
    ) -> KafkaRealtimeLog {
        KafkaRealtimeLog(
            topic: topic, producer: producer,
            consumer: KafkaConsumerConfiguration(client: client, groupId: uniqueName("instance")),
            retention: retention, now: now, logger: logger)
    }

    /// Appends one record per origin, each stamped at least a millisecond after the one before.
    private func appendWithDistinctStamps(_ origins: [String], to log: KafkaRealtimeLog) async throws {
        for origin in origins {
            let before = Date()
            try await log.append([Self.marker(origin)])
            while Date().timeIntervalSince(before) < 0.002 { await Task.yield() }
        }
    }

    /// The broker's timestamps of the topic's first `count` records, read by a plain consumer.
    private func stampsOfRecords(in topic: String, count: Int) async throws -> [Date] {
        let consumer = try await KafkaConsumer.reading(
            [topic], since: Date(timeIntervalSince1970: 0),
            configuration: KafkaConsumerConfiguration(client: client, groupId: uniqueName("stamps")), logger: logger)
        var stamps: [Date] = []
        for try await message in consumer.messages {
            stamps.append(try #require(message.timestamp))
            if stamps.count == count { break }
        }
        await consumer.close()
        #expect(stamps[0] < stamps[1])
        return stamps
    }

    /// Runs `log`, appends records from `last` every 100 ms until it applied one (so one was appended after the log
    /// located its start, however long that took), and returns the origins it applied.
    private func origins(
        readBy log: KafkaRealtimeLog, until last: String, append: @escaping @Sendable () async throws -> Void
    ) async throws -> [String] {
        let applied = AppliedOrigins()
        try await withThrowingTaskGroup { group in
            group.addTask {
                try await log.run { _, record in applied.origins.withLock { $0.append(record.origin) } }
            }
            let deadline = ContinuousClock.now + .seconds(15)
            while !applied.origins.withLock({ $0.contains(last) }), ContinuousClock.now < deadline {
                try await append()
                try await Task.sleep(for: .milliseconds(100))
            }
            group.cancelAll()
        }
        let origins = applied.origins.withLock { $0 }
        #expect(origins.contains(last), "the log never applied a record appended after it started")
        return origins.reduce(into: []) { kept, origin in if kept.last != origin { kept.append(origin) } }
    }
}

private final class AppliedOrigins: Sendable {
    let origins = Mutex<[String]>([])
}

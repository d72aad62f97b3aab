import Foundation
import Kafka
import RealtimeTesting
import ServiceKit
import Synchronization
import TestSupport
import Testing

/// The Kafka wrapper against the real broker `make test` starts (Tansu, Kafka wire protocol).
@Suite("Kafka against a real broker", .timeLimit(.minutes(3)))
struct KafkaIntegrationTests {
    let logger = TestInfrastructure.logger("kafka-tests")

    func client() throws -> KafkaClientConfiguration {
        KafkaClientConfiguration(bootstrapServers: [try TestInfrastructure.kafkaBrokers()], clientId: "kafka-tests")
    }

    func makeTopic(partitions: Int) async throws -> String {
        let topic = uniqueName("topic")
        try await KafkaAdmin.createTopics(
            [KafkaTopicSpecification(name: topic, partitions: partitions)], client: try client(), logger: logger
        )
        return topic
    }

    func makeProducer() throws -> KafkaProducer {
        try KafkaProducer(configuration: KafkaProducerConfiguration(client: try client()), logger: logger)
    }

    /// A consumer reading every partition of `topic` from `since`, without a group.
    func makeReader(topic: String, since: Date) async throws -> KafkaConsumer {
        try await KafkaConsumer.reading(
            [topic], since: since,
            configuration: KafkaConsumerConfiguration(client: try client(), groupId: uniqueName("reader")),
            logger: logger)
    }

    func makeConsumer(group: String, topic: String) throws -> KafkaConsumer {
        try KafkaConsumer(
            configuration: KafkaConsumerConfiguration(client: try client(), groupId: group), topics: [topic],
            logger: logger
        )
    }

    /// Reads messages until `done` says so, or fails after `timeout`.
    func consume(
        _ consumer: KafkaConsumer, timeout: Duration = .seconds(30),
        until done: @escaping @Sendable ([KafkaMessage]) -> Bool
    ) async throws -> [KafkaMessage] {
        try await withTimeout(timeout) {
            var received: [KafkaMessage] = []
            for try await message in consumer.messages {
                received.append(message)
                if done(received) { break }
            }
            return received
        }
    }

    @Test("1,000 keyed messages over 3 partitions are all consumed, in order per key")
    func keyedMessagesInOrder() async throws {
        let topic = try await makeTopic(partitions: 3)
        let producer = try makeProducer()
        let keys = (0..<10).map { "order-\($0)" }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for key in keys {
                group.addTask {
                    for sequence in 0..<100 {
                        try await producer.send(topic: topic, key: key, value: Data("\(key):\(sequence)".utf8))
                    }
                }
            }
            try await group.waitForAll()
        }
        await producer.close()

        let consumer = try makeConsumer(group: uniqueName("group"), topic: topic)
        let messages = try await consume(consumer) { $0.count >= 1000 }
        try await consumer.commit(messages.last!)
        await consumer.close()

        #expect(messages.count == 1000)
        var sequences: [String: [Int]] = [:]
        var partitionsOfKey: [String: Set<Int32>] = [:]
        for message in messages {
            let parts = String(decoding: message.value, as: UTF8.self).split(separator: ":")
            #expect(message.keyString == String(parts[0]))
            sequences[String(parts[0]), default: []].append(Int(parts[1])!)
            partitionsOfKey[String(parts[0]), default: []].insert(message.partition)
        }
        for key in keys {
            #expect(sequences[key] == Array(0..<100), "messages of \(key) out of order or missing")
            #expect(partitionsOfKey[key]?.count == 1, "one key must stay on one partition")
        }
        #expect(Set(messages.map(\.partition)).count == 3, "ten keys should spread over all three partitions")
    }

    @Test("latest per key: 2,000 keys published three times over all arrive, each key's newest value last")
    func latestPerKeyPublisher() async throws {
        let topic = try await makeTopic(partitions: 2)
        let producer = try makeProducer()
        let publisher = LatestPerKeyPublisher(topic: topic, producer: producer, logger: logger)
        let since = Date()
        let running = Task { try await publisher.run() }
        let keys = 2_000
        var queued = 0
        for round in 0..<3 {
            for key in 0..<keys where publisher.publish(key: "k\(key)", value: Data("\(round)".utf8)) { queued += 1 }
        }
        #expect(queued == 3 * keys, "nothing dropped")

        let reader = try await makeReader(topic: topic, since: since)
        let newestDone = Mutex(Set<String>())
        let messages = try await consume(reader) { received in
            guard let last = received.last, let key = last.keyString else { return false }
            return newestDone.withLock { done in
                if String(decoding: last.value, as: UTF8.self) == "2" { done.insert(key) }
                return done.count == keys
            }
        }
        await reader.close()
        publisher.stop()
        try await running.value
        await producer.close()

        var rounds: [String: [Int]] = [:]
        for message in messages {
            rounds[message.keyString ?? "", default: []].append(
                Int(String(decoding: message.value, as: UTF8.self)) ?? -1)
        }
        #expect(rounds.count == keys)
        #expect(rounds.values.allSatisfy { $0 == $0.sorted() && $0.last == 2 }, "a key's older value after its newer")
        #expect(messages.count <= 3 * keys)
        #expect(!publisher.publish(key: "k0", value: Data()), "a stopped publisher takes nothing")
    }

    @Test("latest per key: past its capacity of waiting keys a new key is dropped, a waiting key is replaced")
    func latestPerKeyCapacity() async throws {
        let producer = try makeProducer()
        let publisher = LatestPerKeyPublisher(topic: "unused", capacity: 2, producer: producer, logger: logger)
        #expect(publisher.publish(key: "a", value: Data("1".utf8)))
        #expect(publisher.publish(key: "b", value: Data("1".utf8)))
        #expect(!publisher.publish(key: "c", value: Data("1".utf8)))
        #expect(publisher.publish(key: "a", value: Data("2".utf8)))
        await producer.close()
    }

    @Test("a consumer that stops before committing gets the uncommitted messages again after restart")
    func uncommittedMessagesAreRedelivered() async throws {
        let topic = try await makeTopic(partitions: 1)
        let producer = try makeProducer()
        for index in 0..<10 {
            try await producer.send(topic: topic, key: "k", value: Data("m\(index)".utf8))
        }
        await producer.close()
        let group = uniqueName("group")

        let first = try makeConsumer(group: group, topic: topic)
        let firstRun = try await consume(first) { $0.count == 10 }
        try await first.commit(firstRun[4])  // processed m0...m4 only
        await first.close()

        let second = try makeConsumer(group: group, topic: topic)
        let secondRun = try await consume(second) { $0.count == 5 }
        await second.close()
        #expect(secondRun.map { String(decoding: $0.value, as: UTF8.self) } == ["m5", "m6", "m7", "m8", "m9"])
    }

    @Test("a reader from a time gets, in every partition, the records from that time on, and nothing older")
    func readingFromATime() async throws {
        let topic = try await makeTopic(partitions: 3)
        let producer = try makeProducer()
        let keys = (0..<12).map { "key-\($0)" }
        // In one go, so that each partition's records share a batch: Tansu 0.6 puts the end of such a log just
        // after the batch's first record.
        let before = keys.map { KafkaOutgoingMessage(topic: topic, key: $0, value: Data("before:\($0)".utf8)) }
        for result in try await producer.send(before) { _ = try result.get() }
        // Everything already there is older than an hour from now: each partition is read from its end (Tansu
        // answers this time with the first offset, which the reader corrects).
        let reader = try await makeReader(topic: topic, since: Date().addingTimeInterval(3_600))
        for key in keys { try await producer.send(topic: topic, key: key, value: Data("after:\(key)".utf8)) }
        let later = try await consume(reader) { $0.count >= keys.count }
        #expect(Set(later.map { String(decoding: $0.value, as: UTF8.self) }) == Set(keys.map { "after:\($0)" }))
        await reader.close()
        // From the first record's own time: every record, in each partition from its start.
        let fromTheStart = try await makeReader(topic: topic, since: Date(timeIntervalSince1970: 0))
        let first = try #require(
            try await consume(fromTheStart) { $0.count >= 2 * keys.count }.compactMap(\.timestamp).min())
        await fromTheStart.close()
        let everything = try await makeReader(topic: topic, since: first)
        let all = try await consume(everything) { $0.count >= 2 * keys.count }
        #expect(Set(all.map { String(decoding: $0.value, as: UTF8.self) }).count == 2 * keys.count)
        await everything.close()
        await producer.close()
    }

    @Test("a reader from a time inside a long log of batches starts at the first record stamped at or after it")
    func readingFromATimeInsideALog() async throws {
        // Tansu 0.6 answers such a time with offset 0 (not in its recent index): the reader must not trust it.
        let topic = try await makeTopic(partitions: 1)
        let producer = try makeProducer()
        for batch in 0..<60 {
            let messages = (0..<20).map {
                KafkaOutgoingMessage(topic: topic, key: "k", value: Data("\(batch * 20 + $0)".utf8))
            }
            for result in try await producer.send(messages) { _ = try result.get() }
            try await Task.sleep(for: .milliseconds(5))
        }
        await producer.close()
        let fromTheStart = try await makeReader(topic: topic, since: Date(timeIntervalSince1970: 0))
        let all = try await consume(fromTheStart) { $0.count >= 1_200 }
        await fromTheStart.close()
        for index in [1, 150, 300, 599, 900, 1_199] {
            let since = try #require(all[index].timestamp)
            let expected = try #require(all.firstIndex { ($0.timestamp ?? .distantPast) >= since })
            let reader = try await makeReader(topic: topic, since: since)
            // Everything from there to the end, once and in order: nothing fetched while locating the start leaks in.
            let read = try await consume(reader) { $0.last?.offset == all.last?.offset }
            // What the search answered (it may be early: the reader drops what comes before the time), and the
            // stamps from there to the expected start as the reader from the start saw them.
            let began = reader.startOffsets.values.first ?? 0
            let around = all[max(0, min(Int(began), expected) - 1)..<min(all.count, expected + 2)].map {
                "\($0.offset)@\(($0.timestamp?.timeIntervalSince1970 ?? 0) * 1000)"
            }
            #expect(
                read.map(\.offset) == all[expected...].map(\.offset),
                "since the stamp of record \(index) (\(since.timeIntervalSince1970 * 1000) ms): began at \(reader.startOffsets); around it \(around)"
            )
            await reader.close()
        }
    }

    @Test("two consumers in one group split the partitions")
    func consumersSplitPartitions() async throws {
        let topic = try await makeTopic(partitions: 3)
        let group = uniqueName("group")
        let first = try makeConsumer(group: group, topic: topic)
        let second = try makeConsumer(group: group, topic: topic)
        let producer = try makeProducer()
        let received = Locked<[String: Set<Int32>]>([:])

        try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask {
                for try await message in first.messages {
                    received.withLock { _ = $0["first", default: []].insert(message.partition) }
                }
            }
            tasks.addTask {
                for try await message in second.messages {
                    received.withLock { _ = $0["second", default: []].insert(message.partition) }
                }
            }
            // Keep producing on every key until both members have received messages after the rebalance.
            try await eventually(timeout: .seconds(60), interval: .milliseconds(200), "both members receiving") {
                for index in 0..<30 {
                    try await producer.send(topic: topic, key: "key-\(index)", value: Data("x".utf8))
                }
                return received.withLock { $0.count == 2 }
                    && first.assignment().count + second.assignment().count == 3
            }
            tasks.cancelAll()
        }
        let firstPartitions = first.assignment()
        let secondPartitions = second.assignment()
        #expect(firstPartitions.isDisjoint(with: secondPartitions))
        #expect(firstPartitions.union(secondPartitions).count == 3)
        #expect(!firstPartitions.isEmpty && !secondPartitions.isEmpty)
        await producer.close()
        await first.close()
        await second.close()
    }

    @Test("a send to an unreachable broker fails with a retriable delivery error naming librdkafka")
    func unreachableBroker() async throws {
        var configuration = KafkaProducerConfiguration(
            client: KafkaClientConfiguration(bootstrapServers: ["127.0.0.1:19199"], clientId: "kafka-tests")
        )
        configuration.deliveryTimeout = .seconds(2)
        let producer = try KafkaProducer(configuration: configuration, logger: logger)
        await #expect {
            try await producer.send(topic: "nowhere", key: "k", value: Data("x".utf8))
        } throws: { error in
            guard let error = error as? KafkaError else { return false }
            return error.kind == .deliveryFailed && error.isRetriable && "\(error)".contains("librdkafka")
        }
        await #expect(throws: KafkaError.self) { try await producer.checkBroker(timeout: .milliseconds(500)) }
        await producer.close()
    }

    @Test("an unknown librdkafka property is a configuration error")
    func invalidProperty() throws {
        var client = try client()
        client.additionalProperties = ["no.such.property": "1"]
        #expect {
            _ = try KafkaProducer(configuration: KafkaProducerConfiguration(client: client), logger: logger)
        } throws: { error in
            (error as? KafkaError)?.kind == .configuration && "\(error)".contains("no.such.property")
        }
    }

    @Test("creating topics that exist already succeeds")
    func createTopicsIsIdempotent() async throws {
        let topic = try await makeTopic(partitions: 2)
        try await KafkaAdmin.createTopics(
            [KafkaTopicSpecification(name: topic, partitions: 2)], client: try client(), logger: logger
        )
    }

    @Test("the loaded librdkafka is new enough for the local broker")
    func libraryVersion() {
        #expect(!KafkaLibrary.isTooOldForTansu, "loaded \(KafkaLibrary.description)")
        #expect(KafkaLibrary.path != nil)
    }
}

import Kafka
import Testing

/// What a reader from a time drops in front of its first record stamped at or after the time.
@Suite("Records before a reader's time")
struct RecordsBeforeTimeTests {
    let partition = KafkaTopicPartition(topic: "t", partition: 0)
    let other = KafkaTopicPartition(topic: "t", partition: 1)

    @Test("records stamped before the time are dropped until the first at or after it; from there on all pass")
    func dropsUntilTheFirstAtOrAfter() {
        let filter = RecordsBeforeTime(milliseconds: 1_000, starts: [partition: 10..<20])
        #expect(!filter.admits(partition, offset: 10, stamp: 998))
        #expect(!filter.admits(partition, offset: 11, stamp: 999))
        #expect(filter.admits(partition, offset: 12, stamp: 1_000))
        // A producer's clock can lag: once the partition reached the time, older stamps are its records too.
        #expect(filter.admits(partition, offset: 13, stamp: 999))
    }

    @Test("a record written after the search passes whatever its stamp, and ends the check")
    func recordsAfterTheSearchPass() {
        let filter = RecordsBeforeTime(milliseconds: 1_000, starts: [partition: 10..<20])
        #expect(filter.admits(partition, offset: 20, stamp: 5))
        #expect(filter.admits(partition, offset: 19, stamp: 5))
    }

    @Test("a record without a stamp passes; partitions are checked apart; one read from its end is not checked")
    func partitionsApart() {
        let filter = RecordsBeforeTime(milliseconds: 1_000, starts: [partition: 10..<20, other: 7..<7])
        #expect(filter.admits(other, offset: 7, stamp: 3))
        #expect(!filter.admits(partition, offset: 10, stamp: 3))
        #expect(filter.admits(partition, offset: 11, stamp: -1))
        #expect(filter.admits(partition, offset: 12, stamp: 3))
        #expect(filter.admits(KafkaTopicPartition(topic: "u", partition: 0), offset: 0, stamp: 3))
    }
}

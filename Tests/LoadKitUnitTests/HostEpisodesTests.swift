import Testing

@testable import LoadKit

@Suite struct HostEpisodesTests {
    let episodes = HostEpisodes(spans: [10.0...10.1, 12.0...12.05])

    @Test func anOperationMeetsAnEpisodeItOverlapsOrFollowsWithinTheSettlingTime() {
        #expect(episodes.touch(from: 9.99, to: 10.02))
        #expect(episodes.touch(from: 10.12, to: 10.13))
        #expect(episodes.touch(from: 11.9, to: 12.2))
        #expect(!episodes.touch(from: 9.9, to: 9.999))
        #expect(!episodes.touch(from: 10.16, to: 10.2))
        #expect(!episodes.touch(from: 10.12, to: 10.13, settling: 0))
    }

    @Test func coverageCountsOnlyWhatFallsInsideTheSpan() {
        let (count, seconds) = episodes.coverage(from: 10.05, to: 12.0 + 0.01)
        #expect(count == 2)
        #expect(abs(seconds - 0.06) < 1e-9)
        #expect(episodes.coverage(from: 11.0, to: 11.5).count == 0)
    }

    @Test func samplesAreSplitByWhetherTheirOperationMetAnEpisode() {
        let samples = LatencySamples()
        samples.add(30, sentAt: 0.0)  // 100.000-100.030, before the episode at 100.05
        samples.add(80, sentAt: 0.0)  // 100.000-100.080, into it
        samples.add(5, sentAt: 0.12)  // 100.120, within 50 ms after it
        samples.add(5, sentAt: 0.5)  // 100.500, clear
        samples.add(7)  // no moment given: in neither set
        let (clear, met) = samples.split(by: HostEpisodes(spans: [100.05...100.1]), origin: 100)
        #expect(clear.count == 2)
        #expect(met.count == 2)
    }

    @Test func samplesAreGroupedByTheSecondTheirOperationBegan() {
        let samples = LatencySamples()
        samples.add(1, sentAt: 0.2)
        samples.add(2, sentAt: 1.5)
        samples.add(3, sentAt: 0.7)
        let bySecond = samples.bySecond()
        #expect(bySecond.map(\.second) == [0, 1])
        #expect(bySecond.map(\.samples.count) == [2, 1])
    }

    @Test func anOperationTimedFromAnInstantIsPlacedOnTheLoadClock() {
        let samples = LatencySamples()
        let began = ContinuousClock.now
        samples.add(since: began)
        let moment = LoadClock.seconds(at: began)
        let (clear, met) = samples.split(by: HostEpisodes(spans: [(moment - 0.01)...(moment + 0.01)]), origin: 0)
        #expect(met.count == 1)
        #expect(clear.count == 0)
        #expect(samples.split(by: HostEpisodes(spans: [(moment + 60)...(moment + 61)]), origin: 0).clear.count == 1)
    }

    @Test func percentilesAndResetCoverEverySample() {
        let samples = LatencySamples()
        #expect(samples.percentile(0.99) == nil)
        for value in 1...100 { samples.add(Double(value)) }
        #expect(samples.percentile(0.5) == 51)
        #expect(samples.percentile(0.99) == 100)
        samples.reset()
        #expect(samples.count == 0)
        #expect(samples.bySecond().isEmpty)
    }
}

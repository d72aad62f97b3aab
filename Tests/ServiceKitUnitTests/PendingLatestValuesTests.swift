import Testing

@testable import RealtimePlatform

@Suite struct PendingLatestValuesTests {
    @Test func aNewerValueReplacesTheOneWaitingAndKeepsItsPlace() {
        var pending = PendingLatestValues<Int>(limit: 10)
        let kept = [pending.put(1, forKey: "a"), pending.put(2, forKey: "b"), pending.put(3, forKey: "a")]
        #expect(kept == [true, true, true])
        #expect(pending.count == 2)
        let taken = pending.take(10)
        #expect(taken == [3, 2])
        #expect(pending.count == 0)
    }

    @Test func keysAreTakenInTurnWhileValuesKeepComing() {
        var pending = PendingLatestValues<String>(limit: 10)
        for key in ["a", "b", "c", "d", "e"] { _ = pending.put(key, forKey: key) }
        var batches = [pending.take(2)]
        // a and b come again before the others were written: they wait behind c, d and e.
        _ = pending.put("a2", forKey: "a")
        _ = pending.put("b2", forKey: "b")
        batches.append(pending.take(2))
        _ = pending.put("c2", forKey: "c")
        batches.append(pending.take(3))
        batches.append(pending.take(3))
        #expect(batches == [["a", "b"], ["c", "d"], ["e", "a2", "b2"], ["c2"]])
        #expect(pending.count == 0)
    }

    @Test func aNewKeyPastTheLimitIsRefusedButAWaitingKeyIsStillReplaced() {
        var pending = PendingLatestValues<Int>(limit: 2)
        let kept = [
            pending.put(1, forKey: "a"), pending.put(2, forKey: "b"), pending.put(3, forKey: "c"),
            pending.put(4, forKey: "a"),
        ]
        #expect(kept == [true, true, false, true])
        let first = pending.take(1)
        let keptAfterTaking = pending.put(5, forKey: "c")
        let rest = pending.take(5)
        #expect(first == [4])
        #expect(keptAfterTaking)
        #expect(rest == [2, 5])
    }
}

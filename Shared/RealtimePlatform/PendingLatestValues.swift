/// Values waiting to be written, the newest of each key, taken oldest key first: a key's newer value replaces the
/// one waiting and keeps its place, so when values come faster than they are written every key is still written in
/// turn. (Taken in a dictionary's order, the same thousand keys went out batch after batch while the others waited:
/// one run of the location benchmark at 5,000 couriers delivered 34 positions a second, 17.5 s late.)
struct PendingLatestValues<Value> {
    private var values: [String: Value] = [:]
    /// The keys waiting, in the order their first waiting value came; those before `first` are taken.
    private var order: [String] = []
    private var first = 0
    /// The most keys that may wait.
    let limit: Int

    init(limit: Int) { self.limit = limit }

    /// How many keys wait.
    var count: Int { values.count }

    /// Keeps `value` as the newest of `key`; false (nothing kept) if `key` is new and `limit` keys wait.
    mutating func put(_ value: Value, forKey key: String) -> Bool {
        if values.updateValue(value, forKey: key) != nil { return true }
        guard values.count <= limit else {
            values.removeValue(forKey: key)
            return false
        }
        order.append(key)
        return true
    }

    /// Removes and returns the values of at most `maximum` keys, those waiting longest first.
    mutating func take(_ maximum: Int) -> [Value] {
        let keys = order[first..<min(order.count, first + maximum)]
        first += keys.count
        let taken = keys.compactMap { values.removeValue(forKey: $0) }
        if first == order.count {
            order.removeAll(keepingCapacity: true)
            first = 0
        } else if first > order.count / 2 {
            order.removeFirst(first)
            first = 0
        }
        return taken
    }
}

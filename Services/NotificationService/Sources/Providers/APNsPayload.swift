/// The JSON body of an APNs push (and of the `apns.payload` FCM forwards to an iOS app): `aps` with the alert,
/// its sound and `content-available` when it wakes the app, and the message's data as top-level keys.
struct APNsPayload: Encodable, Sendable {
    struct Alert: Encodable, Sendable {
        var title: String
        var body: String
    }

    struct APS: Encodable, Sendable {
        var alert: Alert
        var sound: String
        /// 1 when the push wakes the app (with the alert, so a backgrounded app's handler runs too).
        var contentAvailable: Int?

        enum CodingKeys: String, CodingKey {
            case alert, sound
            case contentAvailable = "content-available"
        }
    }

    var aps: APS
    /// Top-level keys beside `aps`: the message's data and its `notificationId`.
    var custom: [String: String]

    init(_ message: PushMessage) {
        aps = APS(
            alert: Alert(title: message.title, body: message.body),
            sound: message.sound.map { "\($0).caf" } ?? "default", contentAvailable: message.wakesApp ? 1 : nil)
        custom = message.data.filter { $0.key != "aps" }
        custom["notificationId"] = message.notificationId
    }

    /// A key named at run time.
    struct Key: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init(_ stringValue: String) { self.stringValue = stringValue }
        init?(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: Key.self)
        for (key, value) in custom { try container.encode(value, forKey: Key(key)) }
        try container.encode(aps, forKey: Key("aps"))
    }
}

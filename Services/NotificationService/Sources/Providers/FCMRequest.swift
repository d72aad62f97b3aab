/// The JSON body of FCM's HTTP v1 `messages:send`.
struct FCMRequest: Encodable, Sendable {
    struct Message: Encodable, Sendable {
        var token: String
        var android: Android
        var data: [String: String]
        /// The tray notification of a push that does not wake the app.
        var notification: Notification?
        /// What an iOS app registered through FCM gets for a push that wakes the app.
        var apns: APNs?
    }

    struct Android: Encodable, Sendable {
        var priority: String
        var ttl: String?
        var collapseKey: String?
        var notification: AndroidNotification?

        enum CodingKeys: String, CodingKey {
            case priority, ttl, notification
            case collapseKey = "collapse_key"
        }
    }

    struct AndroidNotification: Encodable, Sendable {
        var channelId: String
        var sound: String?

        enum CodingKeys: String, CodingKey {
            case sound
            case channelId = "channel_id"
        }
    }

    struct Notification: Encodable, Sendable {
        var title: String
        var body: String
    }

    struct APNs: Encodable, Sendable {
        var headers: [String: String]
        var payload: APNsPayload
    }

    var message: Message
}

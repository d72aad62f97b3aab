import HTTPTypes
import Hummingbird
import HummingbirdCore
import Logging
import NIOCore
import NIOHTTP1
import NIOHTTPTypes
import NIOHTTPTypesHTTP1
import NIOWebSocket
import ServiceLifecycle

/// The HTTP/1.1 connection of an application that serves Engine.IO servers: requests go to the router, and a
/// WebSocket upgrade for a server's path is served by an ``EngineWebSocketHandler`` in the channel pipeline. Once
/// upgraded, the connection holds no task (Hummingbird's WebSocket channel keeps one, with a task group, for the
/// connection's life).
struct EngineHTTPChannel: ServerChildChannel, HTTPChannelHandler {
    enum UpgradeResult: Sendable {
        /// Upgraded: the pipeline serves the connection from here on.
        case webSocket
        case notUpgraded(NIOAsyncChannel<HTTPRequestPart, HTTPResponsePart>)
        /// An upgrade request that was declined: an empty 400.
        case failedUpgrade(NIOAsyncChannel<HTTPRequestPart, HTTPResponsePart>)
    }

    struct Value: ServerChildChannelValue {
        let upgradeResult: EventLoopFuture<UpgradeResult>
        let channel: any Channel
        let firstRequest: FirstRequest
    }

    /// Whether a connection's first request has begun (its head was read), on the channel's event loop.
    struct FirstRequest: Sendable {
        let began: NIOLoopBoundBox<Bool>
        let channel: any Channel

        init(channel: any Channel) {
            self.began = NIOLoopBoundBox(false, eventLoop: channel.eventLoop)
            self.channel = channel
        }

        /// Closes the connection if no request has begun on it: nothing is in flight. On the event loop.
        func closeIfNotBegun() {
            if !began.value { channel.close(promise: nil) }
        }
    }

    let responder: Responder
    let servers: [EngineServer]
    /// How long a connection may take to send the head of its first request before it is closed: a client that
    /// connects and sends nothing would otherwise hold its socket for good.
    let firstRequestTimeout: Duration
    /// How long an HTTP connection (not upgraded) may have no request in flight before it is closed.
    let idleTimeout: Duration

    init(responder: @escaping Responder, servers: [EngineServer], firstRequestTimeout: Duration, idleTimeout: Duration)
    {
        self.responder = Self.redirectingLateUpgrades(responder)
        self.servers = servers
        self.firstRequestTimeout = firstRequestTimeout
        self.idleTimeout = idleTimeout
    }

    /// How the connection sizes its receive buffer. NIO keeps a connection's buffer for its whole life, so its
    /// initial 2 KiB was a fifth of an idle WebSocket's memory; an upgrade request fits in 512 bytes, and the
    /// buffer grows for connections that read more.
    static let receiveBuffers = AdaptiveRecvByteBufferAllocator(minimum: 64, initial: 512, maximum: 65536)

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        channel.eventLoop.makeCompletedFuture { [servers, firstRequestTimeout, idleTimeout] in
            try channel.syncOptions?.setOption(ChannelOptions.recvAllocator, value: Self.receiveBuffers)
            let decision = NIOLoopBoundBox<EngineWebSocketUpgrade?>(nil, eventLoop: channel.eventLoop)
            let attempted = NIOLoopBoundBox(false, eventLoop: channel.eventLoop)
            let firstRequest = FirstRequest(channel: channel)
            let deadline = channel.eventLoop.scheduleTask(in: TimeAmount(firstRequestTimeout)) {
                firstRequest.closeIfNotBegun()
            }
            // Cancelled when the request begins, so that no timer outlives it on the event loop.
            let beginRequest: @Sendable () -> Void = {
                firstRequest.began.value = true
                deadline.cancel()
            }
            let upgrader = NIOTypedWebSocketServerUpgrader<UpgradeResult>(
                maxFrameSize: servers.map(\.configuration.maxPayload).max() ?? 1_000_000,
                enableAutomaticErrorHandling: false,  // EngineWebSocketHandler answers the decoder's errors.
                shouldUpgrade: { channel, head in
                    attempted.value = true
                    beginRequest()
                    let headers = HTTPFields(head.headers)
                    decision.value =
                        servers.lazy.compactMap {
                            $0.webSocketUpgrade(target: head.uri, headers: headers, channel: channel)
                        }.first
                    let accepted = decision.value?.server != nil
                    return channel.eventLoop.makeSucceededFuture(accepted ? HTTPHeaders() : nil)
                },
                upgradePipelineHandler: { channel, _ in
                    channel.eventLoop.makeCompletedFuture {
                        guard let upgrade = decision.value, let server = upgrade.server else {
                            throw ChannelError.inappropriateOperationForState
                        }
                        let handler = EngineWebSocketHandler(server: server, channel: channel)
                        try channel.pipeline.syncOperations.addHandler(handler)
                        handler.start(server.webSocketRole(for: upgrade, writer: handler, peer: channel.remoteAddress))
                        return .webSocket
                    }
                }
            )
            let upgrades = NIOTypedHTTPServerUpgradeConfiguration(
                upgraders: [upgrader],
                notUpgradingCompletionHandler: { channel in
                    beginRequest()
                    return channel.eventLoop.makeCompletedFuture {
                        try channel.pipeline.syncOperations.addHandler(HTTP1ToHTTPServerCodec(secure: false))
                        try channel.pipeline.syncOperations.addHandler(
                            HTTPConnectionStateHandler(idleTimeout: idleTimeout, logger: logger))
                        let http = try NIOAsyncChannel<HTTPRequestPart, HTTPResponsePart>(
                            wrappingChannelSynchronously: channel,
                            configuration: .init(isOutboundHalfClosureEnabled: true)
                        )
                        return attempted.value ? .failedUpgrade(http) : .notUpgraded(http)
                    }
                }
            )
            var configuration = NIOUpgradableHTTPServerPipelineConfiguration(upgradeConfiguration: upgrades)
            configuration.enablePipelining = false  // NIOAsyncChannel serializes the requests.
            configuration.enableErrorHandling = false  // Hummingbird answers parse errors.
            configuration.enableResponseHeaderValidation = false  // HTTPTypes validated them.
            let limits = HTTP1Channel.Configuration().httpDecoder
            configuration.decoderConfiguration.maxHeaderFieldSize = limits.maxHeaderFieldSize
            configuration.decoderConfiguration.maxHeaderListSize = limits.maxHeaderListSize
            configuration.decoderConfiguration.maxHeaderFieldCount = limits.maxHeaderFieldCount
            let result = try channel.pipeline.syncOperations.configureUpgradableHTTPServerPipeline(
                configuration: configuration)
            return Value(upgradeResult: result, channel: channel, firstRequest: firstRequest)
        }
    }

    func handle(value: Value, logger: Logger) async {
        do {
            // At shutdown Hummingbird closes a connection between its requests, in `handleHTTP`. One that has sent
            // no request yet never got there: it held up a graceful shutdown for as long as its client kept it open
            // (a client's pooled connection left unused, a probe; seen as a test's shutdown overrunning). Nothing
            // is in flight on it, so it is closed.
            let upgradeResult = try await withGracefulShutdownHandler {
                try await value.upgradeResult.get()
            } onGracefulShutdown: {
                value.channel.eventLoop.execute {
                    value.firstRequest.closeIfNotBegun()
                }
            }
            switch upgradeResult {
            case .webSocket:
                break  // No task waits on an upgraded connection.
            case .notUpgraded(let http):
                await handleHTTP(asyncChannel: http, logger: logger)
            case .failedUpgrade(let http):
                try await http.executeThenClose { _, outbound in
                    let head = HTTPResponse(
                        status: .badRequest, headerFields: [.connection: "close", .contentLength: "0"])
                    try await outbound.write(contentsOf: [.head(head), .end(nil)])
                }
            }
        } catch {
            logger.debug("connection ended before it was served", metadata: ["error": "\(error)"])
        }
    }

    /// NIO upgrades only a connection's first request: a later one asking for WebSocket is redirected to its own URL
    /// and the connection closed, so the client asks again on a new connection (as Hummingbird does).
    static func redirectingLateUpgrades(_ responder: @escaping Responder) -> Responder {
        struct RedirectedUpgrade: Error {}
        return { request, writer, channel in
            guard request.headers[.upgrade] == "websocket" else {
                return try await responder(request, writer, channel)
            }
            let target = request.uri.query.map { "\(request.uri.path)?\($0)" } ?? request.uri.path
            let response = HTTPResponse(
                status: .temporaryRedirect, headerFields: [.connection: "close", .location: target])
            try await writer.writeResponse(response)
            throw RedirectedUpgrade()
        }
    }
}

extension HTTPFields {
    /// The fields of NIO's HTTP/1 headers (a name that is not a valid field name is left out).
    init(_ headers: HTTPHeaders) {
        self.init()
        for (name, value) in headers {
            if let name = HTTPField.Name(name) { append(HTTPField(name: name, value: value)) }
        }
    }
}

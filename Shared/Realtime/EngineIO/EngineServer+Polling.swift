import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdCore
import Logging
import NIOCore
import NIOPosix
import ServiceLifecycle
import Synchronization

/// Engine.IO over HTTP long-polling: the handshake, polls and posts.
extension EngineServer {
    /// Adds `GET` and `POST` on the configured path.
    public func addRoutes<Context: RequestContext>(to router: Router<Context>) {
        let path = RouterPath(configuration.path)
        router.get(path) { request, context in await self.respond(to: request, context: context) }
        router.post(path) { request, context in await self.respond(to: request, context: context) }
        router.put(path) { request, context in await self.respond(to: request, context: context) }
    }

    /// The Engine.IO answer to an HTTP request on the path.
    public func respond(to request: Request, context: some RequestContext) async -> Response {
        let query = Self.query(of: request.uri.query)
        guard query["EIO"] == "4" else { return Self.error(.badRequest, code: 5, "Unsupported protocol version") }
        guard let transport = query["transport"], transport == "polling" || transport == "websocket" else {
            return Self.error(.badRequest, code: 0, "Transport unknown")
        }
        guard transport == "polling" else {
            // A WebSocket request that was not upgraded (unknown sid, too many sessions from its address, or no
            // Upgrade header).
            let peer = (context as? any RemoteAddressRequestContext)?.remoteAddress
            if let sid = query["sid"], sessions.withLock({ $0.byId[sid] }) == nil {
                return Self.error(.badRequest, code: 1, "Session ID unknown")
            }
            if query["sid"] == nil, atSessionLimit(peer: peer, headers: request.headers) {
                return Self.refusalResponse(.tooManySessions)
            }
            return Self.error(.badRequest, code: 3, "Bad request")
        }
        guard let sid = query["sid"] else {
            guard request.method == .get else { return Self.error(.badRequest, code: 2, "Bad handshake method") }
            let peer = (context as? any RemoteAddressRequestContext)?.remoteAddress
            switch openSession(query: query, headers: request.headers, peer: peer, transport: .polling) {
            case .success(let session):
                return Self.text(EnginePacket.encodePayload([openPacket(for: session, upgrades: ["websocket"])]))
            case .failure(let refusal):
                return Self.refusalResponse(refusal)
            }
        }
        guard let session = sessions.withLock({ $0.byId[sid] }) else {
            if request.method == .get, takeOwedNoop(sid: sid) {
                return Self.text(EnginePacket.encodePayload([EnginePacket(.noop)]))
            }
            return Self.error(.badRequest, code: 1, "Session ID unknown")
        }
        switch request.method {
        case .get:
            return await poll(session, request: request)
        case .post:
            return await post(session, request: request, context: context)
        default:
            return Self.error(.badRequest, code: 3, "Bad request")
        }
    }

    func poll(_ session: EngineSession, request: Request) async -> Response {
        if session.isWebSocket { return Self.error(.badRequest, code: 3, "Bad request") }
        let result: PollResult
        let answered = Atomic<Bool>(false)
        do {
            // A client that drops its waiting poll has gone: the session ends. (The handler also fires when the
            // connection closes after the answer; that is not a drop.)
            result = try await request.body.consumeWithInboundCloseHandler { _ in
                let result = await session.poll()
                answered.store(true, ordering: .releasing)
                return result
            } onInboundClosed: {
                if !answered.load(ordering: .acquiring) { session.close(.transportClose) }
            }
        } catch {
            session.close(.transportClose)
            return Self.error(.badRequest, code: 1, "Session ID unknown")
        }
        // The server closes the connection after a long poll; say so, so clients do not reuse it.
        var response: Response
        switch result {
        case .packets(let packets):
            response = Self.text(EnginePacket.encodePayload(packets))
        case .gone:
            response = Self.error(.badRequest, code: 1, "Session ID unknown")
        case .duplicate:
            response = Self.error(.badRequest, code: 3, "Bad request")
        }
        response.headers[.connection] = "close"
        return response
    }

    func post(_ session: EngineSession, request: Request, context: some RequestContext) async -> Response {
        if session.isWebSocket { return Self.error(.badRequest, code: 3, "Bad request") }
        let body: ByteBuffer
        do {
            body = try await request.body.collect(upTo: configuration.maxPayload)
        } catch {
            session.close(.transportError)
            return Self.error(.contentTooLarge, code: 3, "Payload too large")
        }
        let packets: [EnginePacket]
        do {
            packets = try EnginePacket.decodePayload(String(buffer: body))
        } catch {
            session.close(.protocolError)
            return Self.error(.badRequest, code: 3, "Bad request")
        }
        for packet in packets {
            guard handle(packet, from: session) else { break }
        }
        return Response(
            status: .ok, headers: [.contentType: "text/html", .contentLength: "2"],
            body: .init(byteBuffer: ByteBuffer(string: "ok"))
        )
    }
}

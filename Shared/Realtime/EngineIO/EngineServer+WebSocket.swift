import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdCore
import HummingbirdWebSocket
import Logging
import NIOCore
import NIOPosix
import ServiceLifecycle
import Synchronization

/// Engine.IO over WebSocket: the upgrade (direct, or from polling) and the frame pump.
extension EngineServer {
    /// Whether the client behind `peer` (and the proxy headers) holds as many sessions as it may.
    func atSessionLimit(peer: SocketAddress?, headers: HTTPFields) -> Bool {
        guard let limit = configuration.maxSessionsPerAddress,
            let address = configuration.trustedProxies.clientAddress(peer: peer, headers: Self.headerValues(headers))
        else { return false }
        return sessions.withLock { $0.perAddress[address, default: 0] >= limit }
    }

    /// Header values by lower-cased name (the last of repeated fields wins).
    static func headerValues(_ headers: HTTPFields) -> [String: String] {
        var values: [String: String] = [:]
        for field in headers { values[field.name.canonicalName] = field.value }
        return values
    }

    /// Whether a WebSocket upgrade request on `head` (arriving on `channel`) is for this server and acceptable;
    /// nil if not its path.
    package func shouldUpgrade(_ head: HTTPRequest, channel: any Channel) -> ShouldUpgradeResult<
        WebSocketDataHandler<HTTP1WebSocketUpgradeChannel.Context>
    >? {
        guard let target = head.path, Self.pathMatches(target, configuration.path) else { return nil }
        let query = Self.query(of: target.split(separator: "?", maxSplits: 1).dropFirst().first.map(String.init) ?? "")
        guard query["EIO"] == "4", query["transport"] == "websocket" else { return .dontUpgrade }
        if let sid = query["sid"] {
            // An unknown sid is refused: 400 (Hummingbird answers a declined upgrade with an empty 400).
            guard let session = sessions.withLock({ $0.byId[sid] }) else { return .dontUpgrade }
            guard !session.isWebSocket, session.upgradeState == .none else {
                // Another WebSocket for a session already upgraded, or upgrading: accepted and closed at once, as the
                // reference server does, and the session goes on undisturbed.
                return .upgrade([:]) { _, outbound, _ in try? await outbound.close(.normalClosure, reason: nil) }
            }
            return .upgrade([:]) { inbound, outbound, _ in
                await self.upgrade(session, channel: channel, inbound: inbound, outbound: outbound)
            }
        }
        let headers = head.headerFields
        // A declined upgrade (a starting instance, or too many sessions) is an empty 400 (Hummingbird's); a WebSocket
        // request without upgrade headers gets the protocol's error from `respond(to:context:)`.
        if !handler.acceptsSessions || atSessionLimit(peer: channel.remoteAddress, headers: headers) {
            return .dontUpgrade
        }
        return .upgrade([:]) { inbound, outbound, _ in
            await self.serveWebSocket(
                query: query, headers: headers, channel: channel, inbound: inbound, outbound: outbound)
        }
    }

    /// A session that starts on WebSocket.
    func serveWebSocket(
        query: [String: String], headers: HTTPFields, channel: any Channel, inbound: WebSocketInboundStream,
        outbound: WebSocketOutboundWriter
    ) async {
        let opened = openSession(
            query: query, headers: headers, peer: channel.remoteAddress, transport: .webSocket(channel))
        guard case .success(let session) = opened else {
            // Raced past the check in `shouldUpgrade`: the socket closes with a policy violation.
            try? await outbound.close(.policyViolation, reason: "Too many sessions from this address")
            return
        }
        session.send([openPacket(for: session, upgrades: [])])
        await pump(
            session, inbound: inbound.messages(maxSize: configuration.maxPayload).makeAsyncIterator(),
            outbound: outbound)
    }

    /// The upgrade of a polling session: `2probe`/`3probe`, then `5`, within the upgrade timeout.
    func upgrade(
        _ session: EngineSession, channel: any Channel, inbound: WebSocketInboundStream,
        outbound: WebSocketOutboundWriter
    ) async {
        var messages = inbound.messages(maxSize: configuration.maxPayload).makeAsyncIterator()
        let outcome = await withTaskGroup(of: Void.self) { group -> UpgradeOutcome in
            group.addTask { [configuration] in
                // An upgrade that stalls is abandoned: closing the socket ends the reads below.
                guard (try? await Task.sleep(for: configuration.upgradeTimeout)) != nil else { return }
                try? await outbound.close(.policyViolation, reason: "upgrade timeout")
            }
            defer { group.cancelAll() }
            var began = false
            do {
                guard case .text("2probe") = try await messages.next() else { return .abandonedBeforeProbe }
                // Another WebSocket of the session probed first: it is the one upgrading; leave it be.
                guard session.beginUpgrade() else { return .abandonedBeforeProbe }
                began = true
                try await outbound.write(.text("3probe"))
                guard case .text("5") = try await messages.next() else { return .abandonedAfterProbe }
                session.completeUpgrade(channel: channel)
                return .upgraded
            } catch {
                return began ? .abandonedAfterProbe : .abandonedBeforeProbe
            }
        }
        switch outcome {
        case .upgraded: break
        case .abandonedAfterProbe:
            session.cancelUpgrade()
            return
        case .abandonedBeforeProbe:
            return
        }
        await pump(session, inbound: messages, outbound: outbound)
    }

    /// How a WebSocket's attempt to upgrade a polling session ended; only an attempt that began the upgrade (its
    /// probe answered) may cancel it.
    private enum UpgradeOutcome {
        case upgraded
        case abandonedBeforeProbe
        case abandonedAfterProbe
    }

    /// Writes the session's packets (in a child task) and reads the peer's until either side ends the session.
    func pump(
        _ session: EngineSession, inbound: WebSocketInboundMessageStream.AsyncIterator,
        outbound: WebSocketOutboundWriter
    ) async {
        var inbound = inbound
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                var written = 0
                while let batch = await session.nextWebSocketBatch(written: written) {
                    written = 0
                    for packet in batch {
                        do {
                            if let text = packet.webSocketText {
                                try await outbound.write(.text(text))
                            } else if case .binary(let bytes) = packet.payload {
                                try await outbound.write(.binary(ByteBuffer(bytes: bytes)))
                            }
                        } catch {
                            session.close(.transportError)
                        }
                        written += packet.byteCount
                    }
                }
                // The session closed and its last packets are written: end the socket, which ends the reads.
                try? await outbound.close(.normalClosure, reason: nil)
            }
            do {
                while let message = try await inbound.next() {
                    let packet: EnginePacket
                    switch message {
                    case .text(let text):
                        guard let decoded = try? EnginePacket.decode(text: text[...], allowBase64: false) else {
                            session.close(.protocolError)
                            return
                        }
                        packet = decoded
                    case .binary(let buffer):
                        packet = .binary(Array(buffer: buffer))
                    }
                    guard await handle(packet, from: session) else { return }
                }
                session.close(.transportClose)
            } catch {
                session.close(.transportError)
            }
        }
    }
}

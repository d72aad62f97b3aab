import Realtime
import Testing

@Suite("JSON values and protocol packets")
struct JSONAndPacketTests {
    @Test(
        "JSON round-trips exactly: key order, number lexemes, unicode, no escaped slashes",
        arguments: [
            #"{"b":1,"a":[true,false,null],"c":{"z":"x","y":-2.5e3}}"#, #"["message",1,"2",{"3":[true]}]"#, #""a/b""#,
            #""\u00e9 and \ud83d\ude00 and \n""#, "0", "-0.5", #"{"":{}}"#, "[]",
        ]
    )
    func roundTrip(text: String) throws {
        let value = try JSONValue.parse(text)
        let expected = text.replacingOccurrences(of: #"\u00e9"#, with: "é").replacingOccurrences(
            of: #"\ud83d\ude00"#, with: "😀")
        #expect(value.serialized == expected)
    }

    @Test(
        "invalid JSON is refused",
        arguments: ["", "{", "[1,]", "{\"a\"}", "01", "1.", "tru", "\"\\x\"", "\"\\ud800\"", "[1] 2", "\"a\u{01}\""])
    func invalid(text: String) {
        #expect(throws: JSONParseError.self) { try JSONValue.parse(text) }
    }

    @Test("deeply nested input is refused rather than exhausting the stack")
    func depth() {
        #expect(throws: JSONParseError.self) { try JSONValue.parse(String(repeating: "[", count: 100_000)) }
    }

    @Test("Engine.IO polling payloads: record separator, base64 binary")
    func enginePayload() throws {
        let packets = try EnginePacket.decodePayload("4hello\u{1E}bAQIDBA==\u{1E}2")
        #expect(packets == [EnginePacket(.message, "hello"), .binary([1, 2, 3, 4]), EnginePacket(.ping)])
        #expect(EnginePacket.encodePayload(packets) == "4hello\u{1E}bAQIDBA==\u{1E}2")
        for bad in ["abc", "", "4a\u{1E}", "b%%%", "7x"] {
            #expect(throws: EngineProtocolError.self) { try EnginePacket.decodePayload(bad) }
        }
    }

    @Test(
        "Socket.IO packets encode as the protocol writes them",
        arguments: [
            ("0", SocketIOPacket(type: .connect)),
            (
                "0/custom,{\"token\":\"abc\"}",
                SocketIOPacket(type: .connect, namespace: "/custom", data: try! JSONValue.parse(#"{"token":"abc"}"#))
            ),
            ("2[\"a\",1]", SocketIOPacket(type: .event, data: try! JSONValue.parse(#"["a",1]"#))),
            (
                "2/chat,7[\"join\"]",
                SocketIOPacket(type: .event, namespace: "/chat", ackId: 7, data: try! JSONValue.parse(#"["join"]"#))
            ),
            (
                "52-[\"m\",{\"_placeholder\":true,\"num\":0},{\"_placeholder\":true,\"num\":1}]",
                SocketIOPacket(
                    type: .binaryEvent,
                    data: try! JSONValue.parse(#"["m",{"_placeholder":true,"num":0},{"_placeholder":true,"num":1}]"#),
                    attachmentCount: 2)
            ),
            ("3456[1]", SocketIOPacket(type: .ack, ackId: 456, data: try! JSONValue.parse("[1]"))),
            ("1/custom,", SocketIOPacket(type: .disconnect, namespace: "/custom")),
        ]
    )
    func socketIOPackets(text: String, packet: SocketIOPacket) throws {
        #expect(try SocketIOPacket.decode(text) == packet)
        let reencoded = packet.namespace != "/" && packet.data == nil ? text : packet.encoded
        #expect(reencoded == text)
    }

    @Test(
        "malformed Socket.IO packets are refused",
        arguments: [
            "abc", "2{}", "2abc[\"x\"]", "2[]", "2[{}]", "2[\"connect\"]", "0[1]", "1{}", "3[1]", "5[\"x\"]",
            "50-[\"x\"]",
            "511-[\"x\"]", "4{\"message\":\"x\"}", "2[\"x\"", "9",
        ]
    )
    func malformed(text: String) {
        #expect(throws: EngineProtocolError.self) { try SocketIOPacket.decode(text) }
    }
}

@Suite("Engine.IO query strings")
struct EngineQueryTests {
    @Test(
        "Empty keys, empty values and bare separators parse without crashing",
        arguments: ["=", "&=&", "==", "=x", "x=", "&&", "%", "a=%zz"])
    func hostileQueries(text: String) {
        _ = EngineServer.query(of: text)
    }

    @Test("Parameters decode percent escapes and plus signs")
    func decodes() {
        let query = EngineServer.query(of: "EIO=4&transport=polling&=&t=a%20b+c&empty=")
        #expect(query["EIO"] == "4")
        #expect(query["transport"] == "polling")
        #expect(query["t"] == "a b c")
        #expect(query["empty"] == "")
        #expect(query[""] == "")
    }
}

@Suite("Socket.IO packet assembly")
struct SocketIOPacketAssemblerTests {
    @Test("a binary packet completes with the attachments it announced, in order")
    func completesWithAttachments() throws {
        var assembler = SocketIOPacketAssembler()
        #expect(
            try assembler.receive(.text(#"52-["m",{"_placeholder":true,"num":0},{"_placeholder":true,"num":1}]"#))
                == nil)
        #expect(try assembler.receive(.binary([1])) == nil)
        let complete = try #require(try assembler.receive(.binary([2, 3])))
        #expect(complete.packet.type == .binaryEvent)
        #expect(complete.attachments == [[1], [2, 3]])
        let next = try #require(try assembler.receive(.text(#"2["after"]"#)))
        #expect(next.packet.type == .event && next.attachments.isEmpty)
    }

    @Test("text while attachments are due, and an attachment nobody announced, are protocol errors")
    func refusesOutOfOrder() throws {
        var waiting = SocketIOPacketAssembler()
        _ = try waiting.receive(.text(#"51-["m",{"_placeholder":true,"num":0}]"#))
        #expect(throws: EngineProtocolError.self) { try waiting.receive(.text(#"2["early"]"#)) }
        var idle = SocketIOPacketAssembler()
        #expect(throws: EngineProtocolError.self) { try idle.receive(.binary([1])) }
    }
}

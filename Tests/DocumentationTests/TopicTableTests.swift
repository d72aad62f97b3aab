import AllocationService
import ChatService
import Contracts
import Foundation
import LocationService
import NotificationService
import OrderService
import ServiceKit
import TestSupport
import Testing

/// One consumer as the topics table of docs/architecture.md names it.
struct DocumentedConsumer: Hashable, CustomStringConvertible {
    var service: String
    var name: String
    var topic: String
    var eachInstance: Bool
    var description: String { "\(service)/\(name) on \(topic)\(eachInstance ? " (each instance)" : "")" }
}

/// The rows of the table under "## Topics": topic, its events, and its consumers.
struct TopicTable {
    var events: [String: Set<String>] = [:]
    var consumers: Set<DocumentedConsumer> = []

    init(markdown: String) throws {
        let section = try #require(markdown.components(separatedBy: "\n## Topics\n").dropFirst().first)
        let body = try #require(section.components(separatedBy: "\n## ").first)
        for line in body.split(separator: "\n") where line.hasPrefix("| `") {
            let cells = line.split(separator: "|", omittingEmptySubsequences: false).map {
                $0.trimmingCharacters(in: .whitespaces)
            }
            let topic = cells[1].trimmingCharacters(in: CharacterSet(charactersIn: "`"))
            events[topic] = Set(cells[4].split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) })
            for entry in cells[5].components(separatedBy: ", ") {
                let parts = entry.split(separator: "`")
                guard let path = parts.first.map(String.init), let slash = path.firstIndex(of: "/") else { continue }
                consumers.insert(
                    DocumentedConsumer(
                        service: String(path[..<slash]), name: String(path[path.index(after: slash)...]), topic: topic,
                        eachInstance: entry.contains("(each instance)")
                    )
                )
            }
        }
    }
}

@Suite("docs/architecture.md's topics table")
struct TopicTableTests {
    static func table() throws -> TopicTable {
        try TopicTable(markdown: try Repository.text("docs/architecture.md"))
    }

    @Test("names every topic with exactly the events EventCatalog publishes there")
    func eventsByTopic() throws {
        let table = try Self.table()
        var catalog: [String: Set<String>] = [:]
        for type in EventCatalog.payloadTypes { catalog[type.topic.rawValue, default: []].insert(type.eventType) }
        #expect(Set(table.events.keys) == Set(Topic.all.map(\.rawValue)))
        for topic in Topic.all.map(\.rawValue) {
            #expect(table.events[topic] == (catalog[topic] ?? []), "the events of \(topic)")
        }
    }

    @Test("names exactly the consumers the five services register, with their topics")
    func consumers() async throws {
        let table = try Self.table()
        var registered: Set<DocumentedConsumer> = []
        for (name, consumers) in [
            (OrderService.name, try await Self.consumers(of: OrderService.self)),
            (ChatService.name, try await Self.consumers(of: ChatService.self)),
            (AllocationService.name, try await Self.consumers(of: AllocationService.self)),
            (LocationService.name, try await Self.consumers(of: LocationService.self)),
            (NotificationService.name, try await Self.consumers(of: NotificationService.self)),
        ] {
            for consumer in consumers {
                for topic in consumer.topics {
                    registered.insert(
                        DocumentedConsumer(
                            service: name, name: consumer.name, topic: topic.rawValue,
                            eachInstance: consumer.eachInstance)
                    )
                }
            }
        }
        #expect(!registered.isEmpty)
        #expect(
            table.consumers == registered,
            "documented only: \(table.consumers.subtracting(registered)); registered only: \(registered.subtracting(table.consumers))"
        )
    }

    /// Builds `Service` as its executable does (in a fresh schema, not run) and returns its consumers.
    static func consumers<Service: ServiceDefinition>(of service: Service.Type) async throws -> [EventConsumer] {
        let environment = try testServiceEnvironment(
            schema: uniqueName(Service.defaultSchema), extra: ["PUSH_LOG_PROVIDER": "true"])
        let app = try await Service.buildApplication(
            configuration: try Service.configuration(environment: environment), environment: environment,
            logger: TestInfrastructure.logger(Service.name)
        )
        return app.consumers
    }
}

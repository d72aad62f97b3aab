// swift-tools-version:6.1
import Foundation
import PackageDescription

let swiftSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny")
]

let package = Package(
    name: "delivery-platform",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "order-service", targets: ["order-service"]),
        .executable(name: "chat-service", targets: ["chat-service"]),
        .executable(name: "allocation-service", targets: ["allocation-service"]),
        .executable(name: "location-service", targets: ["location-service"]),
        .executable(name: "notification-service", targets: ["notification-service"]),
        .executable(name: "devtoken", targets: ["devtoken"]),
    ],
    dependencies: [
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1"),
        .package(url: "https://github.com/hummingbird-project/hummingbird-websocket", from: "2.8.1"),
        .package(url: "https://github.com/vapor/postgres-nio", from: "1.33.2"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-nio-extras", from: "1.35.2"),
        .package(url: "https://github.com/apple/swift-crypto", "3.12.3"..<"5.0.0"),
        .package(url: "https://github.com/vapor/jwt-kit", from: "5.7.1"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.4.1"),
        .package(url: "https://github.com/swift-server/async-http-client", from: "1.37.0"),
        .package(url: "https://github.com/apple/swift-nio-ssl", from: "2.37.6"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-metrics", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
    ],
    targets: [
        .systemLibrary(
            name: "CRdKafka",
            path: "Shared/CRdKafka",
            pkgConfig: "rdkafka",
            providers: [.apt(["librdkafka-dev"]), .brew(["librdkafka"])]
        ),
        .target(name: "Contracts", path: "Shared/Contracts", swiftSettings: swiftSettings),
        .target(
            name: "Kafka",
            dependencies: [
                "CRdKafka",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            path: "Shared/Kafka",
            swiftSettings: swiftSettings
        ),
        .target(
            name: "ServiceKit",
            dependencies: [
                "Contracts",
                "Kafka",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "JWTKit", package: "jwt-kit"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            path: "Shared/ServiceKit",
            resources: [.copy("Migrations")],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "Realtime",
            dependencies: [
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOWebSocket", package: "swift-nio"),
                .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
                .product(name: "NIOHTTPTypesHTTP1", package: "swift-nio-extras"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "Shared/Realtime",
            swiftSettings: swiftSettings
        ),
        .target(
            name: "RealtimeTesting",
            dependencies: [
                "Realtime",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdWSClient", package: "hummingbird-websocket"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            path: "Shared/RealtimeTesting",
            swiftSettings: swiftSettings
        ),
        .target(
            name: "RealtimePlatform",
            dependencies: [
                "Realtime", "Contracts", "Kafka", "ServiceKit",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
            ],
            path: "Shared/RealtimePlatform",
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "socketio-conformance-server",
            dependencies: [
                "Realtime",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Hummingbird", package: "hummingbird"),
            ],
            path: "Tools/SocketIOConformanceServer",
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "realtime-load",
            dependencies: [
                "LoadKit",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            path: "Benchmarks/RealtimeLoad",
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "order-pickup-load",
            dependencies: [
                "Contracts", "Kafka", "ServiceKit", "LoadKit",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ],
            path: "Benchmarks/OrderPickupLoad",
            swiftSettings: swiftSettings
        ),
        .target(
            name: "LoadKit",
            dependencies: [
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ],
            path: "Benchmarks/LoadKit",
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "allocation-load",
            dependencies: [
                "Contracts", "Kafka", "ServiceKit", "LoadKit",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "Benchmarks/AllocationLoad",
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "location-load",
            dependencies: [
                "Contracts", "Kafka", "ServiceKit", "LoadKit",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "Benchmarks/LocationLoad",
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "notification-load",
            dependencies: [
                "Contracts", "Kafka", "ServiceKit", "LoadKit",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "Benchmarks/NotificationLoad",
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "recovery-load",
            dependencies: [
                "Contracts", "Kafka", "ServiceKit", "LoadKit",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "Benchmarks/RecoveryLoad",
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "chat-load",
            dependencies: [
                "Contracts", "Kafka", "ServiceKit", "LoadKit",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "Benchmarks/ChatLoad",
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "devtoken",
            dependencies: [
                "ServiceKit",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "JWTKit", package: "jwt-kit"),
            ],
            path: "Tools/DevToken",
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "fuzz-parsers",
            dependencies: ["Realtime", "ServiceKit", "Contracts", "OrderService"],
            path: "Tools/Fuzz",
            exclude: ["corpus", "dictionaries"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "FuzzTests",
            dependencies: ["fuzz-parsers"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "ContractsTests",
            dependencies: ["Contracts"],
            swiftSettings: swiftSettings
        ),
        // Unit test targets (`*UnitTests`): no Postgres, no broker, no server on a socket, no TestSupport.
        .testTarget(
            name: "LoadKitUnitTests",
            dependencies: ["LoadKit"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "RealtimeUnitTests",
            dependencies: [
                "Realtime",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "NIOWebSocket", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        // The protocol library with its testing module and nothing else: servers on loopback sockets, no platform.
        .testTarget(
            name: "RealtimeLibraryTests",
            dependencies: ["Realtime", "RealtimeTesting", .product(name: "Logging", package: "swift-log")],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "ServiceKitUnitTests",
            dependencies: ["ServiceKit", "Kafka", "Contracts", "Realtime", "RealtimePlatform", "RealtimeTesting"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "RealtimeTests",
            dependencies: [
                "Realtime", "RealtimePlatform", "RealtimeTesting", "TestSupport", "ServiceKit", "Contracts", "Kafka",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
            ],
            exclude: ["python"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "DocumentationTests",
            dependencies: [
                "OrderService", "ChatService", "AllocationService", "LocationService", "NotificationService",
                "TestSupport", "Contracts", "ServiceKit",
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "KafkaTests",
            dependencies: ["Kafka", "TestSupport", "RealtimeTesting"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "ServiceKitTests",
            dependencies: [
                "ServiceKit", "TestSupport", "RealtimeTesting", "Contracts", "Kafka",
                .product(name: "HummingbirdTesting", package: "hummingbird"),
                .product(name: "JWTKit", package: "jwt-kit"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "TestSupport",
            dependencies: [
                "ServiceKit", "Kafka", "Contracts", "Realtime", "RealtimePlatform", "RealtimeTesting",
                .product(name: "JWTKit", package: "jwt-kit"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdTesting", package: "hummingbird"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "HummingbirdWSClient", package: "hummingbird-websocket"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            path: "Tests/TestSupport",
            swiftSettings: swiftSettings
        ),
    ]
        + services([
            ("OrderService", "order-service", [], []),
            ("ChatService", "chat-service", [], []),
            ("AllocationService", "allocation-service", [], []),
            ("LocationService", "location-service", [], []),
            (
                "NotificationService", "notification-service",
                [.product(name: "JWTKit", package: "jwt-kit"), .product(name: "NIOSSL", package: "swift-nio-ssl")],
                [
                    .product(name: "HummingbirdHTTP2", package: "hummingbird"),
                    .product(name: "HummingbirdTLS", package: "hummingbird"),
                    .product(name: "NIOSSL", package: "swift-nio-ssl"), .product(name: "JWTKit", package: "jwt-kit"),
                ]
            ),
        ])
)

/// Each service is a library (its domain, repositories, routes, consumers and SQL migrations) plus a thin
/// executable that only reads the environment and runs it, and a test target importing the library; with the
/// extra dependencies of the library and of its tests. A service with a `Tests/<Library>UnitTests` folder also has
/// a unit test target of that name: its pure rules, with no TestSupport, Postgres or broker.
func services(
    _ list: [(
        library: String, executable: String, dependencies: [Target.Dependency], testDependencies: [Target.Dependency]
    )]
) -> [Target] {
    list.flatMap { service -> [Target] in
        let unitTests: [Target] =
            FileManager.default.fileExists(atPath: "\(Context.packageDirectory)/Tests/\(service.library)UnitTests")
            ? [
                .testTarget(
                    name: "\(service.library)UnitTests",
                    dependencies: [.target(name: service.library), "Contracts", "ServiceKit"],
                    swiftSettings: swiftSettings
                )
            ] : []
        return [
            .target(
                name: service.library,
                dependencies: [
                    "Contracts", "Kafka", "ServiceKit", "Realtime", "RealtimePlatform",
                    .product(name: "Hummingbird", package: "hummingbird"),
                    .product(name: "PostgresNIO", package: "postgres-nio"),
                    .product(name: "AsyncHTTPClient", package: "async-http-client"),
                ] + service.dependencies,
                path: "Services/\(service.library)/Sources",
                resources: [.copy("Migrations")],
                swiftSettings: swiftSettings
            ),
            .executableTarget(
                name: service.executable,
                dependencies: [.target(name: service.library), "ServiceKit"],
                path: "Services/\(service.library)/Main",
                swiftSettings: swiftSettings
            ),
            .testTarget(
                name: "\(service.library)Tests",
                dependencies: [
                    .target(name: service.library), "TestSupport", "RealtimeTesting", "Contracts", "Kafka",
                    "ServiceKit", "Realtime",
                    "RealtimePlatform",
                    .product(name: "HummingbirdTesting", package: "hummingbird"),
                    .product(name: "PostgresNIO", package: "postgres-nio"),
                    .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                ] + service.testDependencies,
                exclude: ["python"].filter {
                    FileManager.default.fileExists(
                        atPath: "\(Context.packageDirectory)/Tests/\(service.library)Tests/\($0)")
                },
                swiftSettings: swiftSettings
            ),
        ] + unitTests
    }
}

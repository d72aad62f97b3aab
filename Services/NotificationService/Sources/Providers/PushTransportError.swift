import AsyncHTTPClient
import Contracts
import Foundation
import JWTKit
import Kafka
import Logging
import NIOCore
import NIOHTTP1
import Synchronization

package struct PushTransportError: Error, CustomStringConvertible {
    package var description: String
}

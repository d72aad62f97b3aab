import AsyncHTTPClient
import Contracts
import Foundation
import Kafka
import NIOCore

/// A routing provider's failure: an HTTP status, a body it could not read, or no route.
package struct EtaProviderError: Error, CustomStringConvertible {
    package var description: String
}

import Contracts
import Foundation
import Realtime

extension SocketIOConfiguration {
    /// The services' settings of the protocol library: the contracts' JSON coding, and handler errors answered as
    /// over HTTP (a ``CodedError`` with its code, a payload that does not decode as a ``DecodingProblem``).
    package static func platform() -> SocketIOConfiguration {
        var configuration = SocketIOConfiguration()
        configuration.coding = .contracts
        configuration.describeError = describePlatformError
        return configuration
    }

    /// The answer to an error of a service's handler: its code and message when it has them.
    package static func describePlatformError(_ error: any Error) -> SocketIOEventError? {
        switch error {
        case let error as any CodedError:
            SocketIOEventError(code: SocketIOErrorCode(error.code), message: error.message)
        case let error as SocketIOPayloadError:
            describePlatformError(DecodingProblem(error.underlying))
        default:
            describeProtocolError(error)
        }
    }
}

extension JSONCoding {
    /// The contracts' JSON coding (``ContractCoding``): the wire format of every event and REST body.
    package static let contracts = JSONCoding(
        encode: { value in try ContractCoding.encode(value) },
        decode: { type, data in try ContractCoding.decode(type, from: data) })
}

extension SocketIOErrorCode {
    /// The socket answer's code for one of the platform's error codes.
    package init(_ code: ErrorCode) { self.init(rawValue: code.rawValue) }
}

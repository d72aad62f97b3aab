/// What an advisory check throws: its description is shown in `/ready` as it is (a failing required check shows
/// only "down"; its raw error, which may name hosts and users, goes to the log).
package struct Degradation: Error, CustomStringConvertible {
    package var description: String
    package init(_ description: String) { self.description = description }
}

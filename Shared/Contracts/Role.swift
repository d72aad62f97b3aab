/// The role a signed-in user acts in, from the token's `role` claim or its `cognito:groups`.
package enum Role: String, Codable, Sendable, CaseIterable {
    case customer
    case rider
    case vendor
    case admin
    case technician
}

/// A random spot in central India, far from other tests' riders and jobs (and from the Bangalore of the order and
/// chat tests), so that parallel tests never offer or track each other's.
package struct TestSpot: Sendable {
    package var lat = Double.random(in: 18...26)
    package var lng = Double.random(in: 74...84)

    package init() {}

    /// `kilometres` north of the spot.
    package func north(_ kilometres: Double) -> (lat: Double, lng: Double) { (lat + kilometres * 0.009, lng) }
}

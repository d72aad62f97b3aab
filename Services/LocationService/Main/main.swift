import LocationService
import ServiceKit

await ServiceMain.run(LocationService.self)

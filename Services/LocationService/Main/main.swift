import LocationService
import ServiceKit

ServiceMain.runTasksOnEventLoops()
await ServiceMain.run(LocationService.self)

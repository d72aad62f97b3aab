import AllocationService
import ServiceKit

ServiceMain.runTasksOnEventLoops()
await ServiceMain.run(AllocationService.self)

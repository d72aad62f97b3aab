import AllocationService
import ServiceKit

await ServiceMain.run(AllocationService.self)

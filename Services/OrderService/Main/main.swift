import OrderService
import ServiceKit

ServiceMain.runTasksOnEventLoops()
await ServiceMain.run(OrderService.self)

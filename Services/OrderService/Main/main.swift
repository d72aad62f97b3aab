import OrderService
import ServiceKit

await ServiceMain.run(OrderService.self)

import NotificationService
import ServiceKit

ServiceMain.runTasksOnEventLoops()
await ServiceMain.run(NotificationService.self)

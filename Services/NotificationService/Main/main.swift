import NotificationService
import ServiceKit

await ServiceMain.run(NotificationService.self)

import ChatService
import ServiceKit

ServiceMain.runTasksOnEventLoops()
await ServiceMain.run(ChatService.self)

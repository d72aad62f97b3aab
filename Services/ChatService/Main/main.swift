import ChatService
import ServiceKit

await ServiceMain.run(ChatService.self)

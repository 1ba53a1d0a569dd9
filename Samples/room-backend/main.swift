// room-backend: a sample app backend for rooms. It declares rules by pattern, answers the
// batched room auth request and gives the public grants, with the user taken from the X-User
// header: a stand-in for a real backend's session, so the CLI, the demo and users can try rooms.
import Dispatch
import Foundation
import RealtimeBackend
import RealtimeProtocol
import SampleSupport
import WebSocket

let options: RoomBackendOptions
do {
    options = try RoomBackendOptions(arguments: Array(CommandLine.arguments.dropFirst()))
} catch .helpRequested {
    print(RoomBackendOptions.usage)
    exit(0)
} catch {
    FileHandle.standardError.write(Data("room-backend: \(error)\n\(RoomBackendOptions.usage)\n".utf8))
    exit(2)
}

let backend = RealtimeBackend(appKey: options.appKey, appSecret: options.appSecret, encryptionMasterKey: options.encryptionMasterKey)
for room in options.rooms {
    let rule = room.rule
    do {
        try backend.room(room.pattern, history: rule.history, presence: rule.presence, maxMembers: rule.maxMembers,
                         membersSend: rule.membersSend, webhook: rule.webhook, sealed: rule.sealed, isPublic: rule.isPublic,
                         authorize: room.owner.map { owner in { @Sendable user, parameters in user != nil && parameters[owner] == user } })
    } catch {
        FileHandle.standardError.write(Data("room-backend: \(error)\n".utf8))
        exit(2)
    }
}

@Sendable func answer(_ request: HTTPServerRequest) async -> HTTPServerResponse {
    func json(_ status: Int, _ value: some Encodable) -> HTTPServerResponse {
        HTTPServerResponse(status: status, contentType: "application/json", text: (try? RealtimeMessage.jsonText(value)) ?? "{}")
    }
    switch (request.method, request.path) {
    case ("POST", "/rooms/auth"):
        guard let body = try? JSONDecoder().decode(RoomAuthorizationRequest.self, from: Data(request.body)),
              body.rooms.count <= RoomAuthorizationRequest.maxRooms else {
            return json(400, ["error": "expected {\"rooms\": [names]} with at most \(RoomAuthorizationRequest.maxRooms) rooms"])
        }
        let user = request.header("x-user").flatMap { $0.isEmpty ? nil : $0 }
        return json(200, await backend.authorizeRooms(body.rooms, user: user, info: user.map { .object(["name": .string($0)]) }))
    case ("GET", "/config"):
        return json(200, backend.config())
    case (_, "/rooms/auth"), (_, "/config"):
        return json(405, ["error": "POST /rooms/auth, GET /config"])
    default:
        return json(404, ["error": "POST /rooms/auth or GET /config"])
    }
}

let context: WebSocketContext
let listener: WebSocketServer
do {
    context = try WebSocketContext()
    listener = try context.listen(host: options.host, port: Int(options.port), customHeaderNames: ["x-user"],
                                  onConnection: { try? $0.close(code: .policyViolation, reason: "HTTP only") },
                                  onRequest: answer)
} catch {
    FileHandle.standardError.write(Data("room-backend: \(error)\n".utf8))
    exit(1)
}
// The port on stdout, so a parent process (a test, the demo) can read it when it asked for 0.
FileHandle.standardOutput.write(Data("port \(listener.port)\n".utf8))

let signalSources = exitOnTermination()
dispatchMain()

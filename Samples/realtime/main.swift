// realtime connect URL [--subscribe CHANNEL]... [--json] [--quiet-errors]
// realtime join URL ROOM... --auth-endpoint URL [--header 'K: V']... [--subscribe CHANNEL]... [--state FILE] [--json] [--quiet-errors]
// realtime history URL ROOM --auth-endpoint URL [--before ID] [--limit N] [--header 'K: V']... [--json]
// realtime publish --api URL --app-id ID --key KEY --secret SECRET --channel CHANNEL... --event NAME --data JSON
// A command-line realtime client: watch a connection, its channels and rooms, page a room's
// history, or publish an event.
import Dispatch
import Foundation
import Realtime

// Line-buffered even into a pipe, so a reader sees each line as it happens.
StandardOutput.useLineBuffering()

/// Writes `realtime: message` to standard error and exits 1.
func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("realtime: \(message)\n".utf8))
    exit(1)
}

let command: Command
do {
    command = try Command.parse(Array(CommandLine.arguments.dropFirst()))
} catch {
    fail("\(error) (see realtime --help)")
}

switch command {
case .help:
    print(Command.usage)
    exit(0)
case .connect(let options):
    let connect: ConnectCommand
    do {
        connect = try ConnectCommand(options: options)
    } catch {
        fail(error.message)
    }
    connect.run()
case .join(let options), .history(let options):
    let rooms: RoomCommand
    do {
        rooms = try RoomCommand(options: options)
    } catch let error as RealtimeError {
        fail(error.message)
    } catch {
        fail("\(error)")
    }
    if case .history = command { rooms.history() } else { rooms.join() }
case .publish(let options):
    // On the main thread, then exit: no dispatchMain(), whose pthread_exit would leave this
    // code's values unreachable for LeakSanitizer.
    switch PublishCommand(options: options).send() {
    case .success(let answer):
        print(answer)
        exit(0)
    case .failure(let error):
        fail("publish: \(error)")
    }
}

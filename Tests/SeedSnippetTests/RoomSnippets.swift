// The Swift snippets of the rooms seed (docs/seeds/realtime-rooms.txt), each as written, in
// main-actor functions: app state at file scope is main-actor isolated, as it is in top-level
// code, so the handlers that mutate it compile only because `on` takes main-actor handlers
// (DESIGN.md, "The seed's code must compile as written in Swift 6"). The one change: the bare
// `order.state` line is `_ = order.state` (a bare expression is a warning).
import BirdRealtime

// MARK: - The app's state and functions the snippets use

@MainActor var status = ""
@MainActor var live = false
@MainActor var shown: [(String, JSONValue, RoomEventMeta)] = []
@MainActor var printedErrors: [String] = []

@MainActor func show(_ event: String, _ data: JSONValue, _ meta: RoomEventMeta) { shown.append((event, data, meta)) }

// MARK: - "Joining"

@MainActor func seedJoin(_ rt: BirdRealtime) async throws -> Room {
    let order = rt.join("order:1042")

    order.on("updated") { data, meta in
        status = data["status"]?.string ?? status   // meta: from, id, at, replayed
    }
    order.on("joined") { _, _ in live = true }
    order.on("error") { error, _ in printedErrors.append(error["code"]?.string ?? "") }   // forbidden, no_rule, full, expired …

    _ = order.state            // .joining, .joined, .failed, .left
    try await order.ready()   // waits until joined, throws its error
    return order
}

@MainActor func seedLeave(_ rt: BirdRealtime, _ order: Room) {
    rt.leave("order:1042")    // or order.leave()
}

// MARK: - "As async sequences, decoded"

struct OrderUpdate: Decodable { let status: String }

@MainActor func seedSequence(_ order: Room) async {
    for await (update, meta) in order.events("updated", as: OrderUpdate.self) {
        status = update.status
        _ = meta
    }
}

// MARK: - "History, and nothing lost on a reconnect"

@MainActor func seedHistory(_ chat: Room) async throws -> (RoomHistoryPage, RoomHistoryPage) {
    let page = try await chat.history(limit: 50)                                   // the newest 50
    let older = try await chat.history(before: page.events.first?.meta.id, limit: 50)
    for event in page.events { show(event.event, event.data, event.meta) }        // page.more: there is older
    return (page, older)
}

// xmpp-client --host ADDRESS --port PORT --jid USER@DOMAIN --password PASSWORD --resource RESOURCE
//             [--ca-file PEM [--direct-tls] [--direct-tls-port PORT]] [--json]
// An XMPPClientStream kept alive by a Reconnector; with --ca-file over TLS (STARTTLS, or direct
// TLS with --direct-tls), the server's certificate checked against the CA file. Standard input: /disconnect, /connect,
// /ping (verifyConnection), /quit; a line starting with '<' is sent as a raw stanza.
// One line per state change and per stanza received.
import Dispatch
import Foundation
import Reconnect
import ReachabilityNetlink
import SampleSupport
import LineStream

func fail(_ message: String, status: Int32) -> Never {
    FileHandle.standardError.write(Data("xmpp-client: \(message)\n".utf8))
    exit(status)
}

/// Starts everything; returns what must live as long as the process.
func run() -> [Any] {
    let usage = "usage: xmpp-client --host ADDRESS --port PORT --jid USER@DOMAIN --password PASSWORD --resource RESOURCE "
        + "[--ca-file PEM [--direct-tls] [--direct-tls-port PORT]] [--json]"
    var options: [String: String] = [:]
    var json = false
    var directTLS = false
    var arguments = CommandLine.arguments.dropFirst()
    while let argument = arguments.popFirst() {
        switch argument {
        case "--json": json = true
        case "--direct-tls": directTLS = true
        case "--host", "--port", "--jid", "--password", "--resource", "--ca-file", "--direct-tls-port":
            guard let value = arguments.popFirst() else { fail(usage, status: 2) }
            options[String(argument.dropFirst(2))] = value
        default: fail(usage, status: 2)
        }
    }
    guard let host = options["host"], let jid = options["jid"], let password = options["password"],
          let resource = options["resource"], let port = UInt16(options["port"] ?? "5222"),
          let directTLSPort = UInt16(options["direct-tls-port"] ?? String(XMPPClientStream.defaultDirectTLSPort)),
          !directTLS || options["ca-file"] != nil
    else { fail(usage, status: 2) }

    let stream: XMPPClientStream
    do {
        let tls = try options["ca-file"].map { path throws(TLSError) in try TLSContext(caFile: path) }
        stream = try XMPPClientStream(
            host: host, port: port, jid: jid, password: password, resource: resource, tls: tls, directTLSPort: directTLSPort
        )
    } catch {
        fail("\(error)", status: 2)
    }
    let reconnector = Reconnector(reachability: { try NetworkReachability(host: $0) })
    reconnector.activate(stream)

    let log = EventLog(format: json ? .json : .text)
    let tokens = [
        log.observe(stream),
        log.observe(reconnector),
        stream.reconnectEvents.observe { event in
            guard case .ready = event else { return }
            if let version = stream.tlsProtocolVersion {
                log.log("secured", detail: "\(version) (\(stream.connectMethod ?? .standard))", source: "stream")
            }
            log.log("bound", detail: stream.boundJID ?? "?", source: "stream")
        },
        stream.onStanza { log.log("stanza", detail: $0.description, source: "stream") },
    ]
    stream.connect(using: directTLS ? .directTLS : .standard)

    Thread.detachNewThread {
        while let line = readLine() {
            switch line {
            case "/disconnect": stream.disconnect()
            case "/connect": stream.connect(using: stream.lastConnectMethod)
            case "/ping": stream.verifyConnection()
            case "/quit": exit(0)
            case _ where line.hasPrefix("<"):
                if !stream.send(rawXML: line) { log.log("not-sent", detail: "not ready: \(line)") }
            default: log.log("unknown-command", detail: line)
            }
        }
    }
    signal(SIGINT, SIG_IGN)
    let interrupt = DispatchSource.makeSignalSource(signal: SIGINT, queue: .main)
    interrupt.setEventHandler { exit(0) }
    interrupt.resume()
    return [tokens, interrupt, reconnector, stream, log]
}

// A global: kept for good, and still reachable (LeakSanitizer) once `dispatchMain()` has ended
// the main thread with `pthread_exit`, unlike the locals of a function that never returns.
let lifetime = run()
dispatchMain()

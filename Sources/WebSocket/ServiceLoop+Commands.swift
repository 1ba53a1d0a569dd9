import CWebSockets
import Glibc

/// The commands other threads queue for the service thread (`ServiceThread.takeCommands`).
extension ServiceLoop {
    /// Performs one command queued by another thread, on the service thread.
    func run(_ command: ServiceCommand) {
        switch command {
        case .connect(let connection, let url, let headers):
            startConnect(connection, url: url, headers: headers)
        case .writable(let id):
            if let record = records[id], record.established, let wsi = record.wsi { writeNow(wsi, id: id) }
        case .kill(let id):
            // Closes without a close frame: lws only sends one when a reason was set. With
            // SO_LINGER 0 the kernel resets the connection and drops what is unsent, instead of
            // keeping an orphaned socket with megabytes for a peer that stopped reading.
            if let wsi = records[id]?.wsi {
                let fd = lws_get_socket_fd(wsi)
                if fd >= 0 {
                    var linger = Glibc.linger(l_onoff: 1, l_linger: 0)
                    _ = setsockopt(fd, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<Glibc.linger>.size))
                }
                lws_set_timeout(wsi, PENDING_TIMEOUT_USER_OK, LWS_TO_KILL_ASYNC)
            }
        case .receiving(let id, let enabled):
            if enabled {
                records[id]?.readingPaused = false
                forgetIfEmpty(id)
            } else {
                record(id).readingPaused = true
            }
            if let record = records[id], record.established, let wsi = record.wsi { lws_rx_flow_control(wsi, enabled ? 1 : 0) }
        case .listen(let request):
            request.reply.resolve(createServer(request))
        case .adopt(let id, let descriptor):
            adopt(descriptor, server: id)
        case .stopServer(let id, let reply):
            stopServer(id)
            reply.resolve(.success(()))
        case .stopAccepting(let id, let reply):
            servers[id]?.accepting = false
            reply.resolve(.success(()))
        case .respond(let id, let exchange):
            if let record = records[id], record.exchange === exchange, let wsi = record.wsi { lws_callback_on_writable(wsi) }
        case .probe(let queuedAt, let completion):
            completion(ContinuousClock.now - queuedAt)
        }
    }

    /// Answers a command left over at shutdown: a connect fails with `contextShutDown`, a
    /// listen is refused, a stop is done already; the rest need no answer.
    func refuse(_ command: ServiceCommand) {
        switch command {
        case .connect(let connection, _, _): connection.fail(.contextShutDown)
        case .listen(let request): request.reply.resolve(.failure(.contextShutDown))
        case .adopt(_, let descriptor): close(descriptor)
        case .stopServer(_, let reply), .stopAccepting(_, let reply): reply.resolve(.success(()))
        case .writable, .kill, .receiving, .respond, .probe: break
        }
    }
}

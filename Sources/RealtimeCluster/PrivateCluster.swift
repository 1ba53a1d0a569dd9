import Foundation
import Glibc
import RealtimeServer
import Redis
import Spawn
import SystemSupport

/// A private cluster on loopback for tests and trials: a `PrivateRedis` (or a Redis Cluster the
/// caller started), N `realtime-server` processes on it (each `--redis` on the private socket,
/// or `--redis-cluster`, `--node nN`, its own fixed port), and
/// optionally nginx (Debian `nginx-light`) as a real load balancer in front of them, proxying
/// WebSocket upgrades and the HTTP API round robin. Nodes can be killed (SIGKILL, as a crash)
/// and started again on their port. Everything is stopped by pid and its files removed by `stop`.
public final class PrivateCluster: Sendable {
    /// One `realtime-server` process of the cluster.
    public final class Node: Sendable {
        /// Its name (`n0`, `n1`, …).
        public let name: String
        /// Its port on 127.0.0.1 (kept across restarts).
        public let port: Int
        private let arguments: [String]
        private let executable: String
        private let process = Locked<ChildProcess?>(nil)
        private let history = Locked<[String]>([])

        init(name: String, port: Int, executable: String, arguments: [String], launcher: [String]) {
            self.name = name
            self.port = port
            // `ip netns exec NAME program …` execs the program in the same process: the pid
            // signalled and killed below is the node's.
            self.executable = launcher.first ?? executable
            self.arguments = launcher.isEmpty ? arguments : Array(launcher.dropFirst()) + [executable] + arguments
        }

        /// Starts the process and waits for it to print its port.
        ///
        /// - Throws: `PrivateCluster.StartFailure` when it exits or says nothing within 30 s.
        public func start() throws {
            let child: ChildProcess
            do {
                child = try ChildProcess(executable, arguments, standardOutput: .pipe, standardError: .pipe)
            } catch {
                throw StartFailure(description: "cannot start \(executable): \(error)")
            }
            process.withLock { $0 = child }
            do {
                _ = try child.waitForLine(timeout: .seconds(30)) { $0.hasPrefix("port ") }
            } catch {
                let output = child.errorLines.suffix(5).joined(separator: " | ")
                kill()
                throw StartFailure(description: "node \(name) did not start: \(error): \(output)")
            }
        }

        /// Kills the process with SIGKILL (a crash: no close frames, no goodbye) and waits for it.
        public func kill() {
            guard let child = process.killProcess() else { return }
            history.withLock { $0 += child.errorLines.suffix(200) }
        }

        /// Stops the process with SIGTERM (a graceful shutdown: `realtime-server` closes its
        /// clients with 4200 and exits) and waits for it; SIGKILL after `grace`.
        ///
        /// - Parameter grace: how long the process may take to exit.
        /// - Returns: whether it exited within `grace` (false: it was killed).
        @discardableResult
        public func terminate(grace: Duration = .seconds(10)) -> Bool {
            guard let child = process.withLock({ $0 }) else { return true }
            child.signal(SIGTERM)
            let exited = (try? child.waitUntilExit(timeout: grace)) != nil
            kill()
            return exited
        }

        /// Sends `signal` to the process (`SIGSTOP`, `SIGCONT`, or one the node's executable
        /// handles).
        ///
        /// - Returns: whether it was sent (false when the node is not running).
        @discardableResult
        public func signal(_ signal: Int32) -> Bool {
            process.withLock { $0 }?.signal(signal) ?? false
        }

        /// Whether the process runs.
        public var isRunning: Bool { process.withLock { $0?.isRunning ?? false } }

        /// The node's log lines (stderr), of this run and the ones killed before it (their last 200).
        public var logLines: [String] { history.withLock { $0 } + (process.withLock { $0?.errorLines } ?? []) }

        /// The process id (0 when not running).
        public var processIdentifier: pid_t { process.withLock { $0?.processIdentifier ?? 0 } }
    }

    /// Why the cluster did not start.
    public struct StartFailure: Error, CustomStringConvertible {
        /// What went wrong.
        public var description: String
    }

    /// The cluster's Redis (`nil` when the nodes run on a Redis Cluster).
    public let redis: PrivateRedis?
    /// The nodes, in order.
    public let nodes: [Node]
    /// The load balancer's port on 127.0.0.1, when there is one.
    public let balancerPort: Int?
    private let directory: String
    private let balancer: Locked<ChildProcess?>
    private let launcher: [String]
    private let balancerAddress: String

    /// Starts Redis, the nodes and, when asked, nginx in front of them.
    ///
    /// - Parameters:
    ///   - count: how many `realtime-server` processes (1…16).
    ///   - app: the one app every node serves.
    ///   - serverExecutable: the `realtime-server` binary, or any that takes its options and
    ///     prints `port N` (after `serverArguments`).
    ///   - serverArguments: arguments before the server options (a sub-command).
    ///   - loadBalancer: whether to start nginx (`nginx` on the PATH or in /usr/sbin).
    ///   - extraArguments: more options for every node (`--activity-timeout 5`).
    ///   - launcher: a command that runs the nodes and nginx, before each one's own command
    ///     (`["/usr/sbin/ip", "netns", "exec", NAME]` runs them in a network namespace); Redis is
    ///     reached over its unix socket, so it stays in this process's namespace. It must exec
    ///     the program in its own process (signals go to the launcher's pid).
    ///   - balancerAddress: the address nginx listens on, with its port (127.0.0.1 by default;
    ///     `0.0.0.0` inside a private namespace, for clients reaching it over a veth link).
    ///   - persistentRedis: Redis keeps its data across `redis.restart()` (`PrivateRedis`'s
    ///     `persistent`).
    ///   - redisCluster: a Redis Cluster's nodes (`PrivateRedisCluster.endpoints`, reachable
    ///     where the launcher runs the nodes): the nodes run with `--redis-cluster` on it, and
    ///     no `PrivateRedis` is started.
    /// - Throws: `StartFailure` (or `PrivateRedis.StartFailure`); whatever started is stopped.
    public init(nodes count: Int, app: RealtimeApp, serverExecutable: String, serverArguments: [String] = [],
                loadBalancer: Bool = false, extraArguments: [String] = [], launcher: [String] = [],
                balancerAddress: String = "127.0.0.1", persistentRedis: Bool = false, redisCluster: [RedisEndpoint]? = nil) throws {
        guard (1...16).contains(count) else { throw StartFailure(description: "1 to 16 nodes, not \(count)") }
        var template = Array("/tmp/private-cluster.XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw StartFailure(description: "mkdtemp failed: errno \(errno)") }
        directory = String(cString: made)
        balancer = Locked(nil)
        self.launcher = launcher
        self.balancerAddress = balancerAddress
        let store: [String]
        if let redisCluster {
            redis = nil
            store = ["--redis-cluster", redisCluster.map { $0.description.replacingOccurrences(of: "redis://", with: "") }.joined(separator: ",")]
        } else {
            let redis = try PrivateRedis(persistent: persistentRedis)
            guard case .unix(let socket) = redis.endpoint else { throw StartFailure(description: "a private Redis without a socket") }
            self.redis = redis
            store = ["--redis", socket]
        }
        var ports: [Int] = []
        for _ in 0..<(count + (loadBalancer ? 1 : 0)) { ports.append(try Self.freePort(avoiding: ports)) }
        nodes = (0..<count).map { index in
            Node(name: "n\(index)", port: ports[index], executable: serverExecutable, arguments: serverArguments + [
                "--port", String(ports[index]), "--app-id", app.id, "--app-key", app.key, "--app-secret", app.secret,
            ] + store + ["--node", "n\(index)"] + extraArguments, launcher: launcher)
        }
        balancerPort = loadBalancer ? ports[count] : nil
        do {
            for node in nodes { try node.start() }
            if let balancerPort { try startBalancer(port: balancerPort) }
        } catch {
            stop()
            throw error
        }
    }

    deinit { stop() }

    /// Stops nginx, every node and Redis, and removes the cluster's files. Idempotent.
    public func stop() {
        balancer.killProcess()
        for node in nodes { node.kill() }
        redis?.stop()
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// nginx with one upstream of every node: WebSocket upgrades passed through (HTTP/1.1,
    /// `Upgrade` and `Connection` headers), a refused or dead node skipped for the next one.
    private func startBalancer(port: Int) throws {
        let servers = nodes.map { "    server 127.0.0.1:\($0.port) max_fails=1 fail_timeout=1s;" }.joined(separator: "\n")
        let user = geteuid() == 0 ? "user root;\n" : ""
        let configuration = """
        \(user)master_process off;
        worker_processes 1;
        daemon off;
        pid \(directory)/nginx.pid;
        error_log \(directory)/nginx-error.log warn;
        events { worker_connections 4096; }
        http {
          access_log off;
          client_body_temp_path \(directory)/body;
          proxy_temp_path \(directory)/proxy;
          fastcgi_temp_path \(directory)/fastcgi;
          uwsgi_temp_path \(directory)/uwsgi;
          scgi_temp_path \(directory)/scgi;
          map $http_upgrade $connection_upgrade { default upgrade; '' close; }
          upstream realtime {
        \(servers)
          }
          server {
            listen \(balancerAddress):\(port);
            location / {
              proxy_pass http://realtime;
              proxy_http_version 1.1;
              proxy_set_header Upgrade $http_upgrade;
              proxy_set_header Connection $connection_upgrade;
              proxy_set_header Host $host;
              proxy_connect_timeout 1s;
              proxy_read_timeout 1h;
              proxy_next_upstream error timeout;
            }
          }
        }

        """
        let path = directory + "/nginx.conf"
        guard FileManager.default.createFile(atPath: path, contents: Data(configuration.utf8)) else {
            throw StartFailure(description: "cannot write \(path)")
        }
        let executable = ["/usr/sbin/nginx", "/usr/local/sbin/nginx"].first { FileManager.default.isExecutableFile(atPath: $0) } ?? "nginx"
        let child: ChildProcess
        do {
            let command = launcher + ["/usr/bin/env", executable, "-p", directory, "-e", directory + "/nginx-error.log", "-c", path]
            child = try ChildProcess(command[0], Array(command.dropFirst()), standardOutput: .pipe, standardError: .pipe)
        } catch {
            throw StartFailure(description: "cannot start nginx (Debian nginx-light, scripts/setup --test-peers): \(error)")
        }
        balancer.withLock { $0 = child }
        let deadline = ContinuousClock.now + .seconds(10)
        // Started elsewhere (another namespace), nginx cannot be probed from here: its
        // process's view of TCP sockets says whether it listens.
        while !(launcher.isEmpty ? Self.accepts(port: port) : Self.listens(port: port, process: child.processIdentifier)) {
            guard child.isRunning, ContinuousClock.now < deadline else {
                let log = (try? String(contentsOfFile: directory + "/nginx-error.log", encoding: .utf8)) ?? ""
                throw StartFailure(description: "nginx did not listen on \(port): \((child.errorLines + [log]).suffix(5).joined(separator: " | "))")
            }
            usleep(20_000)
        }
    }

    /// A TCP port on 127.0.0.1 free now (bound to 0 and closed), not one of `avoiding`.
    static func freePort(avoiding: [Int]) throws -> Int {
        for _ in 0..<20 {
            if let port = bindLoopback(port: 0), port > 0, !avoiding.contains(port) { return port }
        }
        throw StartFailure(description: "no free TCP port on 127.0.0.1")
    }

    /// Binds a TCP socket to 127.0.0.1:`port` (0: one the kernel picks) and closes it.
    ///
    /// - Returns: the port bound, or nil when it could not be.
    static func bindLoopback(port: Int) -> Int? {
        withLoopbackSocket(port: port) { fd, address, length -> Int? in
            guard bind(fd, address, length) == 0 else { return nil }
            var bound = sockaddr_in()
            var size = socklen_t(MemoryLayout<sockaddr_in>.size)
            _ = withUnsafeMutablePointer(to: &bound) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &size) }
            }
            return Int(UInt16(bigEndian: bound.sin_port))
        } ?? nil
    }

    /// Runs `body` with a new TCP socket and the address 127.0.0.1:`port`, then closes it.
    ///
    /// - Returns: `body`'s result, or nil when no socket could be made.
    private static func withLoopbackSocket<Result>(port: Int, _ body: (Int32, UnsafePointer<sockaddr>, socklen_t) -> Result) -> Result? {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { body(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
    }

    /// Whether a TCP socket listens on `port` (any address) in the network namespace of
    /// `process`, from that namespace's table, `/proc/PID/net/tcp` (proc(5): the local port in
    /// hexadecimal, state `0A` for `LISTEN`). Only the process started there listens on it.
    static func listens(port: Int, process: pid_t) -> Bool {
        guard let table = try? String(contentsOfFile: "/proc/\(process)/net/tcp", encoding: .utf8) else { return false }
        let local = String(format: ":%04X", port)
        return table.split(separator: "\n").dropFirst().contains { line in
            let fields = line.split(separator: " ")
            return fields.count > 3 && fields[1].hasSuffix(local) && fields[3] == "0A"
        }
    }

    /// Whether something accepts TCP connections on 127.0.0.1:`port`.
    static func accepts(port: Int) -> Bool {
        withLoopbackSocket(port: port) { fd, address, length in connect(fd, address, length) == 0 } ?? false
    }
}

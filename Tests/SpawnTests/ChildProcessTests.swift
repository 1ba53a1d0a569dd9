import Dispatch
import Foundation
import Glibc
import SystemSupport
import ReconnectTesting
import Testing
import Spawn

@Suite("ChildProcess")
struct ChildProcessTests {
    // MARK: run

    @Test("run returns the exit status and both outputs")
    func runCapturesOutput() throws {
        let result = try ChildProcess.run("/bin/sh", ["-c", "echo out; echo err >&2; exit 3"])
        #expect(result.termination == .exited(3))
        #expect(result.status == 3)
        #expect(result.standardOutput == "out\n")
        #expect(result.standardError == "err\n")
    }

    @Test("a signal that ends the child is reported as such")
    func signalTermination() throws {
        let result = try ChildProcess.run("/bin/sh", ["-c", "kill -TERM $$"])
        #expect(result.termination == .signaled(SIGTERM))
        #expect(result.status == SIGTERM)
    }

    @Test("a missing program fails to spawn with ENOENT")
    func missingProgram() {
        #expect(throws: ChildProcessError.spawnFailed(executable: "/nonexistent/program", errno: ENOENT)) {
            try ChildProcess.run("/nonexistent/program")
        }
    }

    @Test("a bare name is looked up in PATH")
    func pathLookup() throws {
        #expect(try ChildProcess.run("true").termination == .exited(0))
    }

    @Test("a NUL byte in an argument is refused")
    func nulByte() {
        #expect(throws: ChildProcessError.self) { try ChildProcess.run("/bin/echo", ["a\u{0}b"]) }
    }

    @Test("environment additions and the working directory reach the child")
    func environmentAndDirectory() throws {
        let result = try ChildProcess.run(
            "/bin/sh",
            ["-c", #"echo "$CHILD_PROCESS_TEST|$HOME"; pwd"#],
            environment: ["CHILD_PROCESS_TEST": "added", "HOME": "/replaced"],
            workingDirectory: "/usr"
        )
        #expect(result.standardOutput == "added|/replaced\n/usr\n")
        // The rest of this process's environment is passed on.
        let path = try ChildProcess.run("/bin/sh", ["-c", #"echo "$PATH""#], environment: ["X": "1"])
        #expect(path.standardOutput == (ProcessInfo.processInfo.environment["PATH"] ?? "") + "\n")
    }

    @Test("run writes the standard input it is given")
    func runWithInput() throws {
        let result = try ChildProcess.run("/bin/cat", standardInput: "one\ntwo\n")
        #expect(result.standardOutput == "one\ntwo\n")
    }

    @Test("run with a timeout kills a program that runs too long")
    func runTimeout() throws {
        let started = ContinuousClock.now
        #expect(throws: ChildProcessError.timedOut(waitingFor: "the end of the output", timeout: .milliseconds(200))) {
            try ChildProcess.run("/bin/sleep", ["30"], timeout: .milliseconds(200))
        }
        #expect(ContinuousClock.now - started < .seconds(10))
    }

    // MARK: What the child inherits

    @Test("the child gets only descriptors 0, 1 and 2, whatever this process has open")
    func onlyStandardDescriptors() throws {
        // Descriptors without close-on-exec, as a careless library would leave them, one of them
        // numbered high (other tests open and close descriptors concurrently).
        let low = open("/dev/null", O_RDONLY)
        let high = fcntl(low, F_DUPFD, 600)
        defer {
            close(low)
            close(high)
        }
        #expect(low >= 0 && high >= 600)
        // ls opens the directory it lists: the lowest free number, 3, is its own.
        let listing = try ChildProcess.run("/bin/ls", ["-1", "/proc/self/fd"])
        let descriptors = Set(listing.standardOutput.split(separator: "\n").compactMap { Int32($0) })
        #expect(descriptors.isSubset(of: [0, 1, 2, 3]), "the child had \(descriptors.sorted())")
    }

    @Test("a child does not keep another pipe open: its reader sees end of file")
    func noInheritedPipe() throws {
        var ends: [Int32] = [-1, -1]
        #expect(pipe(&ends) == 0)  // no O_CLOEXEC on purpose
        let sleeper = try ChildProcess("/bin/sleep", ["30"])
        defer {
            sleeper.signal(SIGKILL)
            sleeper.waitUntilExit()
        }
        close(ends[1])
        var byte: UInt8 = 0
        // The only write end was ours: end of file at once, not after the sleeper exits.
        #expect(read(ends[0], &byte, 1) == 0)
        close(ends[0])
    }

    @Test("the child starts with no blocked signals, even when the spawning thread blocks some")
    func cleanSignalMask() throws {
        var blocked = sigset_t()
        sigemptyset(&blocked)
        sigaddset(&blocked, SIGTERM)
        sigaddset(&blocked, SIGINT)
        var previous = sigset_t()
        pthread_sigmask(SIG_BLOCK, &blocked, &previous)
        defer { pthread_sigmask(SIG_SETMASK, &previous, nil) }
        let status = try ChildProcess.run("/bin/cat", ["/proc/self/status"]).standardOutput
        let line = status.split(separator: "\n").first { $0.hasPrefix("SigBlk:") }
        #expect(line?.split(separator: "\t").last == "0000000000000000")
    }

    @Test("the child leads its own process group unless asked otherwise")
    func processGroup() throws {
        let own = try ChildProcess("/bin/sleep", ["30"])
        let shared = try ChildProcess("/bin/sleep", ["30"], newProcessGroup: false)
        defer {
            for child in [own, shared] {
                child.signal(SIGKILL)
                child.waitUntilExit()
            }
        }
        #expect(getpgid(own.processIdentifier) == own.processIdentifier)
        #expect(getpgid(shared.processIdentifier) == getpgrp())
    }

    // MARK: Lines, input, signals

    @Test("waitForLine finds a line by predicate, including lines that came before")
    func waitForLine() throws {
        let child = try ChildProcess("/bin/sh", ["-c", "echo one; echo two; echo three >&2; sleep 30"])
        defer {
            // The group: sh's sleep holds the pipes too.
            child.signal(SIGKILL, toProcessGroup: true)
            child.waitUntilExit()
        }
        #expect(try child.waitForLine(timeout: .seconds(10)) { $0 == "two" } == "two")
        #expect(try child.waitForLine(timeout: .seconds(10)) { _ in true } == "one")
        #expect(try child.waitForLine(startingAt: 1, timeout: .seconds(10)) { _ in true } == "two")
        #expect(try child.waitForLine(in: .standardError, timeout: .seconds(10)) { $0.hasPrefix("th") } == "three")
        #expect(throws: ChildProcessError.timedOut(waitingFor: "a matching line on stdout", timeout: .milliseconds(100))) {
            try child.waitForLine(timeout: .milliseconds(100)) { $0 == "four" }
        }
        #expect(child.outputLines == ["one", "two"])
        #expect(try child.waitForLines(count: 2, timeout: .seconds(1)) == ["one", "two"])
    }

    @Test("waiting for a line ends at end of file, not at the timeout")
    func outputEnded() throws {
        let child = try ChildProcess("/bin/sh", ["-c", "echo only; printf last"])
        let started = ContinuousClock.now
        #expect(throws: ChildProcessError.outputEnded(.standardOutput, lines: ["only", "last"])) {
            try child.waitForLine(timeout: .seconds(30)) { $0 == "never" }
        }
        #expect(ContinuousClock.now - started < .seconds(20))
        #expect(child.waitUntilExit() == .exited(0))
    }

    @Test("standard input: written lines come back from cat, closing it ends cat")
    func standardInput() throws {
        let child = try ChildProcess("/bin/cat", standardInput: .pipe)
        try child.write("hello\n")
        #expect(try child.waitForLine(timeout: .seconds(10)) { _ in true } == "hello")
        try child.write(Array("again\n".utf8))
        #expect(try child.waitForLine(startingAt: 1, timeout: .seconds(10)) { _ in true } == "again")
        child.closeStandardInput()
        #expect(try child.waitUntilExit(timeout: .seconds(10)) == .exited(0))
        #expect(try child.readAllOutput(timeout: .seconds(10)) == ("hello\nagain\n", ""))
        #expect(throws: ChildProcessError.writeFailed(errno: EBADF)) { try child.write("closed") }
    }

    @Test("writing to a child that no longer reads fails with EPIPE instead of raising SIGPIPE here")
    func brokenPipe() throws {
        let child = try ChildProcess("/bin/true", standardInput: .pipe)
        #expect(child.waitUntilExit() == .exited(0))
        #expect(throws: ChildProcessError.writeFailed(errno: EPIPE)) { try child.write("nobody reads this\n") }
    }

    @Test("waitUntilExit with a timeout gives up on a running child; signal ends it")
    func waitWithTimeout() throws {
        let child = try ChildProcess("/bin/sleep", ["30"])
        #expect(child.isRunning)
        #expect(throws: ChildProcessError.self) { try child.waitUntilExit(timeout: .milliseconds(100)) }
        #expect(child.signal(SIGTERM))
        #expect(try child.waitUntilExit(timeout: .seconds(10)) == .signaled(SIGTERM))
        #expect(!child.isRunning)
        #expect(child.termination == .signaled(SIGTERM))
        // Reaped: its pid is not signalled any more.
        #expect(!child.signal(SIGTERM))
    }

    @Test("a group signal reaches what the child started")
    func groupSignal() throws {
        let child = try ChildProcess("/bin/sh", ["-c", "sleep 30 & echo $!; wait"])
        let grandchild = try #require(pid_t(try child.waitForLine(timeout: .seconds(10)) { _ in true }))
        #expect(child.signal(SIGKILL, toProcessGroup: true))
        #expect(try child.waitUntilExit(timeout: .seconds(10)) == .signaled(SIGKILL))
        // The grandchild is reparented and reaped elsewhere; it must be gone or a zombie soon.
        let deadline = ContinuousClock.now + .seconds(10)
        while ContinuousClock.now < deadline, Self.isAlive(grandchild) { usleep(10_000) }
        #expect(!Self.isAlive(grandchild))
    }

    @Test("onLine sees every line in order, onExit comes after the last one")
    func handlers() throws {
        let events = Locked<[String]>([])
        let exited = DispatchSemaphore(value: 0)
        let child = try ChildProcess(
            "/bin/sh",
            ["-c", "echo a; echo b; printf c; exit 4"],
            standardError: .nullDevice,
            onLine: { stream, line in events.withLock { $0.append("\(stream) \(line)") } },
            onExit: { termination in
                events.withLock { $0.append("exit \(termination.status)") }
                exited.signal()
            }
        )
        #expect(exited.wait(timeout: .now() + .seconds(10)) == .success)
        #expect(events.withLock { $0 } == ["stdout a", "stdout b", "stdout c", "exit 4"])
        #expect(child.termination == .exited(4))
    }

    @Test("dropping the last reference kills a running child, and it is reaped")
    func deinitKills() throws {
        var child: ChildProcess? = try ChildProcess("/bin/sleep", ["30"])
        let pid = try #require(child?.processIdentifier)
        #expect(Self.isAlive(pid))
        child = nil
        let deadline = ContinuousClock.now + .seconds(10)
        while ContinuousClock.now < deadline, kill(pid, 0) == 0 { usleep(10_000) }
        // Reaped (not even a zombie): the pid is gone.
        #expect(kill(pid, 0) == -1 && errno == ESRCH)
    }

    @Test("many children at once from many threads all finish with their own output")
    func concurrentChildren() async throws {
        let results = try await withThrowingTaskGroup(of: (Int, ChildProcess.Result).self) { group in
            for index in 0..<40 {
                group.addTask {
                    try await offPool { (index, try ChildProcess.run("/bin/sh", ["-c", "echo \(index); echo e\(index) >&2"])) }
                }
            }
            return try await group.reduce(into: [:]) { $0[$1.0] = $1.1 }
        }
        #expect(results.count == 40)
        for (index, result) in results {
            #expect(result.termination == .exited(0))
            #expect(result.standardOutput == "\(index)\n")
            #expect(result.standardError == "e\(index)\n")
        }
    }

    /// Alive and not a zombie.
    private static func isAlive(_ pid: pid_t) -> Bool {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8) else { return false }
        // The state follows the command name in parentheses.
        guard let close = stat.lastIndex(of: ")") else { return false }
        let state = stat[stat.index(after: close)...].split(separator: " ").first
        return state != "Z" && state != "X"
    }

    /// Runs blocking work on a thread of its own, not on the cooperative pool.
    private func offPool<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            Thread.detachNewThread { continuation.resume(with: Result { try body() }) }
        }
    }
}

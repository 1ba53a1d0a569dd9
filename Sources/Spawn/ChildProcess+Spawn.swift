import Dispatch
import Glibc
import SystemSupport

// MARK: - Spawning

extension ChildProcess {
    /// The two ends of one pipe.
    struct Pipe {
        var read: Int32
        var write: Int32
    }

    /// The pipes of one child; the child's end of each is `read` for input, `write` for output.
    struct Pipes {
        var input: Pipe?
        var output: Pipe?
        var error: Pipe?

        mutating func closeChildEnds() {
            if let input { close(input.read); self.input?.read = -1 }
            if let output { close(output.write); self.output?.write = -1 }
            if let error { close(error.write); self.error?.write = -1 }
        }

        mutating func closeAll() {
            for pipe in [input, output, error].compactMap({ $0 }) {
                if pipe.read >= 0 { close(pipe.read) }
                if pipe.write >= 0 { close(pipe.write) }
            }
            input = nil
            output = nil
            error = nil
        }
    }

    static func makePipe(for executable: String) throws(ChildProcessError) -> Pipe {
        guard let pipe2 = GNU.pipe2 else { throw .spawnFailed(executable: executable, errno: ENOSYS) }
        var ends: [Int32] = [-1, -1]
        guard pipe2(&ends, O_CLOEXEC) == 0 else { throw .spawnFailed(executable: executable, errno: errno) }
        return Pipe(read: ends[0], write: ends[1])
    }

    /// Spawns the child and sets `pid`; returns 0 or the `errno`.
    static func spawn(
        _ pid: inout pid_t,
        _ executable: String,
        _ arguments: [String],
        environment: [String: String],
        workingDirectory: String?,
        redirections: [Redirection],
        childEnds: [Int32?],
        newProcessGroup: Bool
    ) -> Int32 {
        guard let addCloseFrom = GNU.addCloseFrom, let addChdir = GNU.addChdir else { return ENOSYS }

        var actions = posix_spawn_file_actions_t()
        guard posix_spawn_file_actions_init(&actions) == 0 else { return ENOMEM }
        defer { posix_spawn_file_actions_destroy(&actions) }
        var failure: Int32 = 0
        func check(_ result: Int32) { if failure == 0 && result != 0 { failure = result } }
        for descriptor in 0..<3 {
            switch redirections[descriptor] {
            case .inherit:
                break
            case .nullDevice:
                check(posix_spawn_file_actions_addopen(&actions, Int32(descriptor), "/dev/null", descriptor == 0 ? O_RDONLY : O_WRONLY, 0))
            case .pipe:
                // dup2 clears close-on-exec on the copy (glibc also when the numbers are equal).
                check(posix_spawn_file_actions_adddup2(&actions, childEnds[descriptor] ?? -1, Int32(descriptor)))
            }
        }
        if let workingDirectory { check(addChdir(&actions, workingDirectory)) }
        // Last: nothing but 0, 1 and 2 survives into the child, whatever this process has open.
        check(addCloseFrom(&actions, 3))

        var attributes = posix_spawnattr_t()
        guard posix_spawnattr_init(&attributes) == 0 else { return ENOMEM }
        defer { posix_spawnattr_destroy(&attributes) }
        var noSignals = sigset_t()
        sigemptyset(&noSignals)
        var allSignals = sigset_t()
        sigfillset(&allSignals)
        check(posix_spawnattr_setsigmask(&attributes, &noSignals))
        check(posix_spawnattr_setsigdefault(&attributes, &allSignals))
        var flags = Int32(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF)
        if newProcessGroup {
            flags |= Int32(POSIX_SPAWN_SETPGROUP)
            check(posix_spawnattr_setpgroup(&attributes, 0))
        }
        check(posix_spawnattr_setflags(&attributes, Int16(flags)))
        guard failure == 0 else { return failure }

        let argv = CStringArray([executable] + arguments)
        defer { argv.free() }
        if environment.isEmpty {
            return spawnCall(executable, &pid, &actions, &attributes, argv.pointers, environ)
        }
        let envp = CStringArray(mergedEnvironment(environment))
        defer { envp.free() }
        return spawnCall(executable, &pid, &actions, &attributes, argv.pointers, envp.pointers)
    }

    /// `posix_spawnp` for a bare name (searched in `PATH`), `posix_spawn` for a path.
    static func spawnCall(
        _ executable: String,
        _ pid: inout pid_t,
        _ actions: inout posix_spawn_file_actions_t,
        _ attributes: inout posix_spawnattr_t,
        _ argv: [UnsafeMutablePointer<CChar>?],
        _ envp: UnsafePointer<UnsafeMutablePointer<CChar>?>?
    ) -> Int32 {
        if executable.contains("/") {
            return posix_spawn(&pid, executable, &actions, &attributes, argv, envp)
        }
        return posix_spawnp(&pid, executable, &actions, &attributes, argv, envp)
    }

    /// This process's environment with `additions` added or replacing variables of that name.
    static func mergedEnvironment(_ additions: [String: String]) -> [String] {
        var entries: [String] = []
        var index = 0
        while let entry = environ[index] {
            let text = String(cString: entry)
            let name = text.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false).first.map(String.init) ?? text
            if additions[name] == nil { entries.append(text) }
            index += 1
        }
        for (name, value) in additions.sorted(by: { $0.key < $1.key }) {
            entries.append("\(name)=\(value)")
        }
        return entries
    }

    /// A NULL-terminated `char *[]` of copies of `strings`, for `argv` and `envp`.
    struct CStringArray {
        let pointers: [UnsafeMutablePointer<CChar>?]

        init(_ strings: [String]) {
            pointers = strings.map { strdup($0) } + [nil]
        }

        func free() {
            for pointer in pointers { Glibc.free(pointer) }
        }
    }

    /// glibc functions declared only under `_GNU_SOURCE`, which the Glibc module is not built
    /// with; looking the symbols up keeps this target free of a C shim (as `setns` in
    /// NamespaceThread). `nil` on a glibc without them (before 2.34 for closefrom).
    enum GNU {
        typealias Pipe2 = @convention(c) (UnsafeMutablePointer<Int32>?, Int32) -> Int32
        typealias AddCloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>?, Int32) -> Int32
        typealias AddChdir = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>?, UnsafePointer<CChar>?) -> Int32

        static let pipe2: Pipe2? = symbol("pipe2")
        static let addCloseFrom: AddCloseFrom? = symbol("posix_spawn_file_actions_addclosefrom_np")
        static let addChdir: AddChdir? = symbol("posix_spawn_file_actions_addchdir_np")

        static func symbol<Function>(_ name: String) -> Function? {
            // RTLD_DEFAULT is a null handle in glibc: search the global symbol scope.
            dlsym(nil, name).map { unsafeBitCast($0, to: Function.self) }
        }
    }

    // MARK: Helpers

    /// Writes all of `bytes`, retrying after EINTR and partial writes, with `SIGPIPE` blocked on
    /// this thread (a pipe whose reader is gone raises it, and its default action would end this
    /// process); a `SIGPIPE` raised here is consumed. Returns 0 or the `errno`.
    static func writeWithoutSIGPIPE(_ bytes: [UInt8], to descriptor: Int32) -> Int32 {
        PipeSignal.suppressed {
            var offset = 0
            while offset < bytes.count {
                let done = offset
                switch SystemCall.retryingInterrupts({ bytes.withUnsafeBytes { Glibc.write(descriptor, $0.baseAddress! + done, $0.count - done) } }) {
                case .success(let written): offset += written
                case .failure(let error): return error.errno
                }
            }
            return 0
        }
    }

    /// Nanoseconds in `duration`, 0 for a negative one, capped at about 100 years.
    static func nanoseconds(_ duration: Duration) -> Int {
        let (seconds, attoseconds) = duration.components
        guard seconds >= 0 else { return 0 }
        guard seconds < 3_000_000_000 else { return 3_000_000_000 * 1_000_000_000 }
        return Int(seconds) * 1_000_000_000 + Int(attoseconds / 1_000_000_000)
    }
}

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import SystemSupport

/// Thin wrappers over the socket calls: they retry `EINTR` and turn failures into
/// `TCPConnectionError.system` with the errno kept, so callers never read `errno` late.
package enum Syscall {
    /// What a non-blocking read or write did.
    package enum Progress: Equatable {
        /// This many bytes moved (0 for `read` means end of file).
        case done(Int)
        /// `EAGAIN`: try again when the socket is ready.
        case wouldBlock
    }

    package static func close(_ fd: Int32) {
        // Linux closes the descriptor even when close(2) reports EINTR: never retry it.
        _ = closeDescriptor(fd)
    }

    package static func read(_ fd: Int32, into buffer: UnsafeMutableRawBufferPointer) throws(TCPConnectionError) -> Progress {
        switch SystemCall.retryingInterrupts({ readDescriptor(fd, buffer.baseAddress, buffer.count) }) {
        case .success(let count): return .done(count)
        case .failure(let error) where error.errno == EAGAIN || error.errno == EWOULDBLOCK: return .wouldBlock
        case .failure(let error): throw .system(operation: "read", errno: error.errno)
        }
    }

    /// `send(2)` with `MSG_NOSIGNAL`: a closed peer gives `EPIPE`, never `SIGPIPE`.
    package static func send(_ fd: Int32, _ bytes: UnsafeRawBufferPointer) throws(TCPConnectionError) -> Progress {
        switch SystemCall.retryingInterrupts({ sendDescriptor(fd, bytes.baseAddress, bytes.count, Int32(MSG_NOSIGNAL)) }) {
        case .success(let count): return .done(count)
        case .failure(let error) where error.errno == EAGAIN || error.errno == EWOULDBLOCK: return .wouldBlock
        case .failure(let error): throw .system(operation: "send", errno: error.errno)
        }
    }

    /// The pending error of a socket (`SO_ERROR`): how a non-blocking connect ended.
    package static func pendingError(_ fd: Int32) -> Int32 {
        var code: Int32 = 0
        var length = socklen_t(MemoryLayout<Int32>.size)
        guard getsockopt(fd, SOL_SOCKET, SO_ERROR, &code, &length) == 0 else { return errno }
        return code
    }

    package static func setReuseAddress(_ fd: Int32) throws(TCPConnectionError) {
        var one: Int32 = 1
        guard setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size)) == 0 else {
            throw .system(operation: "setsockopt(SO_REUSEADDR)", errno: errno)
        }
    }
}

extension Syscall {
    package static func listen(_ fd: Int32, backlog: Int32) throws(TCPConnectionError) {
        guard listenOn(fd, backlog) == 0 else { throw .system(operation: "listen", errno: errno) }
    }
}

private func listenOn(_ fd: Int32, _ backlog: Int32) -> Int32 { listen(fd, backlog) }
private func closeDescriptor(_ fd: Int32) -> Int32 { close(fd) }
private func readDescriptor(_ fd: Int32, _ buffer: UnsafeMutableRawPointer?, _ count: Int) -> Int { read(fd, buffer, count) }
private func sendDescriptor(_ fd: Int32, _ bytes: UnsafeRawPointer?, _ count: Int, _ flags: Int32) -> Int { send(fd, bytes, count, flags) }

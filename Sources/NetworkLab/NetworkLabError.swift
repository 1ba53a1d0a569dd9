import Foundation
import Spawn

/// An error from ``NetworkLab`` or ``NetworkNamespace``.
public enum NetworkLabError: Error, Sendable, Equatable, CustomStringConvertible {
    /// Network namespaces cannot be created by this process; the associated value says why
    /// (for example, not running as root, or iproute2 missing).
    case unavailable(String)
    /// An `ip` command exited with a non-zero status.
    ///
    /// `command` is the full command line, `status` the exit status (or the terminating signal
    /// number, as `ChildProcess.Termination.status` gives it), and `stderr` what `ip` wrote
    /// there, which usually names the problem (`Cannot find device "veth9"`, `File exists`).
    case commandFailed(command: String, status: Int32, stderr: String)
    /// The namespace's thread could not join the namespace: opening `/var/run/netns/NAME` or
    /// `setns(2)` with `CLONE_NEWNET` failed with this `errno`.
    case setnsFailed(errno: Int32)
    /// The lab or namespace was closed; its namespaces no longer exist.
    case closed
    /// ``NetworkLab/setCarrier(of:present:)`` was given a link that ``NetworkLab/addVethLink(_:peer:)``
    /// did not create.
    case unknownVethLink(String)

    /// A one-line explanation suitable for a test failure message.
    public var description: String {
        switch self {
        case .unavailable(let reason):
            return "network namespaces are unavailable: \(reason)"
        case .commandFailed(let command, let status, let stderr):
            let message = stderr.trimmingCharacters(in: .whitespacesAndNewlines)
            return "`\(command)` failed with status \(status)" + (message.isEmpty ? "" : ": \(message)")
        case .setnsFailed(let errno):
            return "setns(CLONE_NEWNET) failed: \(String(cString: strerror(errno))) (errno \(errno))"
        case .closed:
            return "the network lab is closed"
        case .unknownVethLink(let name):
            return "\(name) is not a veth link created by this network lab"
        }
    }
}

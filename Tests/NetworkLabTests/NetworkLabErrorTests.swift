import Foundation
import Testing

import ReconnectTesting
import NetworkLab

@Suite("NetworkLabError")
struct NetworkLabErrorTests {
    @Test(
        "description explains the error in one line",
        arguments: [
            (NetworkLabError.unavailable("not root"), "network namespaces are unavailable: not root"),
            (
                .commandFailed(command: "ip link set veth9 up", status: 1, stderr: "Cannot find device \"veth9\"\n"),
                "`ip link set veth9 up` failed with status 1: Cannot find device \"veth9\""
            ),
            (.commandFailed(command: "ip monitor", status: 2, stderr: ""), "`ip monitor` failed with status 2"),
            (.setnsFailed(errno: ENOENT), "setns(CLONE_NEWNET) failed: No such file or directory (errno 2)"),
            (.closed, "the network lab is closed"),
            (.unknownVethLink("eth0"), "eth0 is not a veth link created by this network lab"),
        ]
    )
    func description(error: NetworkLabError, expected: String) {
        #expect(error.description == expected)
    }

}

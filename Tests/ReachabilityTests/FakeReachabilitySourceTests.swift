import Reachability
import ReconnectTesting
import SystemSupport
import Testing

@Suite struct FakeReachabilitySourceTests {
    @Test("observers hear changes synchronously, once per change, until cancelled")
    func observers() {
        let source = FakeReachabilitySource()
        let seen = Locked<[ReachabilityFlags]>([])
        let observation = source.observe { value in seen.withLock { $0.append(value.flags) } }
        source.set([])
        source.set([])                 // no change, no call
        source.set([.reachable])
        observation.cancel()
        source.set([])
        #expect(seen.withLock { $0 } == [[], [.reachable]])
        #expect(source.flags == [])
        #expect(source.observerCount == 0)
    }
}

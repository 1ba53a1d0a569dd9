// The client under the name the realtime-connection-lifecycle seed imports (`import
// BirdRealtime`): the `Realtime` module and the modules its public API uses (protocol types,
// `ObservationToken`, `ExponentialBackoff`, `Reconnector`), re-exported.
@_exported import Reachability
@_exported import Realtime
@_exported import RealtimeProtocol
@_exported import Reconnect

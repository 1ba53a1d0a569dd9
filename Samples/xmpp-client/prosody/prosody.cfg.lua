-- A private Prosody for the xmpp-client sample and the integration tests: loopback only,
-- no TLS, no server-to-server, PLAIN authentication over the unencrypted stream.
-- @DATA_PATH@ and @PORT@ are filled in by whoever copies this template (see README.md).
-- Never use these settings on a real network: passwords cross the wire in clear text.

run_as_root = true          -- we run it as root in containers; it refuses otherwise
data_path = "@DATA_PATH@"   -- accounts and the pidfile live here, never in /var/lib/prosody
pidfile = "@DATA_PATH@/prosody.pid"
log = {
    { levels = { min = "info" }, to = "file", filename = "@DATA_PATH@/prosody.log" };
}

c2s_ports = { @PORT@ }
c2s_interfaces = { "127.0.0.1" }
c2s_direct_tls_ports = {}
s2s_ports = {}
s2s_interfaces = {}
admin_socket = "@DATA_PATH@/prosody.sock"

modules_enabled = {
    "disco";
    "roster";
    "saslauth"; -- SASL (RFC 6120 section 6) and resource binding (section 7)
    "ping";     -- XEP-0199, used by verifyConnection()
}
modules_disabled = { "s2s", "tls" }

c2s_require_encryption = false
allow_unencrypted_plain_auth = true
authentication = "internal_plain"
storage = "internal"
certificates = "@DATA_PATH@" -- no certificates: TLS is off

VirtualHost "localhost"

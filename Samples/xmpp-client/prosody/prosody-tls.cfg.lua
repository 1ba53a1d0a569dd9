-- A private Prosody that requires TLS, for the xmpp-client sample's TLS modes and the
-- integration tests: loopback only, no server-to-server, STARTTLS on @PORT@ (RFC 6120
-- section 5) and direct TLS on @DIRECT_TLS_PORT@ (XEP-0368), encryption required before SASL.
-- @DATA_PATH@, @PORT@ and @DIRECT_TLS_PORT@ are filled in by whoever copies this template (see
-- README.md); the certificate and key are @DATA_PATH@/certs/localhost.crt and .key.

run_as_root = true          -- we run it as root in containers; it refuses otherwise
data_path = "@DATA_PATH@"   -- accounts and the pidfile live here, never in /var/lib/prosody
pidfile = "@DATA_PATH@/prosody.pid"
log = {
    { levels = { min = "info" }, to = "file", filename = "@DATA_PATH@/prosody.log" };
}

c2s_ports = { @PORT@ }
c2s_interfaces = { "127.0.0.1" }
c2s_direct_tls_ports = { @DIRECT_TLS_PORT@ }
c2s_direct_tls_interfaces = { "127.0.0.1" }
s2s_ports = {}
s2s_interfaces = {}
admin_socket = "@DATA_PATH@/prosody.sock"

modules_enabled = {
    "disco";
    "roster";
    "tls";      -- STARTTLS (RFC 6120 section 5)
    "saslauth"; -- SASL (RFC 6120 section 6) and resource binding (section 7)
    "ping";     -- XEP-0199, used by verifyConnection()
}
modules_disabled = { "s2s" }

c2s_require_encryption = true
authentication = "internal_plain"
storage = "internal"
certificates = "@DATA_PATH@/certs" -- Prosody finds localhost.crt and localhost.key here

VirtualHost "localhost"

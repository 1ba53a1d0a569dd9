// Placeholder while the netlink layer is written.

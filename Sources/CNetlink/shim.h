#ifndef CNETLINK_SHIM_H
#define CNETLINK_SHIM_H

// libnl-3 and libnl-route-3, plus the few kernel constants Swift cannot import as written.
#include <netlink/netlink.h>
#include <netlink/msg.h>
#include <netlink/attr.h>
#include <netlink/socket.h>
#include <netlink/errno.h>
#include <netlink/cache.h>
#include <netlink/route/link.h>
#include <netlink/route/addr.h>
#include <netlink/route/route.h>
#include <netlink/route/nexthop.h>
#include <linux/rtnetlink.h>

/// IFF_LOWER_UP (carrier present), from <linux/if.h>, which clashes with glibc's <net/if.h>.
static inline unsigned int cnl_iff_lower_up(void) { return 0x10000; }
/// IFF_DORMANT, from <linux/if.h>.
static inline unsigned int cnl_iff_dormant(void) { return 0x20000; }

#endif

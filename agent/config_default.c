/* The configuration proflet runs with when no --config is given: scrape the
 * Go pprof endpoints of 127.0.0.1:6060 (where examples/demoapp listens by
 * default) with the default profile types and write every profile to
 * ./proflet-data, so a laptop needs no server at all. Const data. */
#include "agent/config.h"

const char cfg_default_yaml[] =
    "# proflet embedded default configuration (see docs/config.md)\n"
    "log-level: info\n"
    "server:\n"
    "  listen-address: 127.0.0.1:4100\n"
    "scrape-configs:\n"
    "  - job-name: default\n"
    "    scrape-interval: 15s\n"
    "    static-configs:\n"
    "      - application: demoapp\n"
    "        targets: [127.0.0.1:6060]\n"
    "remote-write:\n"
    "  - url: file://./proflet-data\n";

// The system zlib (Debian zlib1g-dev), for the raw DEFLATE that CTAP 2.1's
// large-blob array entries are compressed with (§6.10.3). Only the daemon
// imports it, when it seeds or reads a credential's large blob.
#ifndef CZLIB_H
#define CZLIB_H

#include <zlib.h>

#endif

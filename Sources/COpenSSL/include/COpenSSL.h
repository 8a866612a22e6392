// OpenSSL libcrypto, the only cryptography latchkey uses (Debian libssl-dev,
// OpenSSL 3). LatchkeyCrypto is the one Swift target that imports this module;
// it keeps every pointer from here in an owning class.
#ifndef COPENSSL_H
#define COPENSSL_H

#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/ec.h>
#include <openssl/ecdsa.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/kdf.h>
#include <openssl/obj_mac.h>
#include <openssl/objects.h>
#include <openssl/param_build.h>
#include <openssl/params.h>
#include <openssl/rand.h>
#include <openssl/rsa.h>
#include <openssl/sha.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#endif

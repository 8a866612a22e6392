// libcrypto for the benchmark baseline: ECDSA P-256 signing straight through EVP.
#include <openssl/ec.h>
#include <openssl/evp.h>

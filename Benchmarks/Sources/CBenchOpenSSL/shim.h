// libcrypto for the benchmark baselines: each credential algorithm's signature straight
// through EVP.
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/rsa.h>

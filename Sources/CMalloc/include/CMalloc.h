// glibc's malloc extensions (<malloc.h>, which Swift's Glibc module leaves
// out): mallopt(3), to fix the mmap threshold so that the buffers of large
// request bodies are given back to the kernel when freed, and
// malloc_trim(3), to return the heap's free pages after such a request
// (ControlHTTPGuard.swift, HeapPolicy).
#ifndef CMALLOC_H
#define CMALLOC_H

#include <malloc.h>

#endif

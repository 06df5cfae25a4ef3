#if defined(__linux__)
#include <malloc.h>
#endif

#include "CMallocStats.h"

size_t cmallocstats_allocated_bytes(void) {
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 33))
  struct mallinfo2 info = mallinfo2();
  return info.uordblks + info.hblkhd;
#else
  return 0;
#endif
}

void cmallocstats_release_free_memory(void) {
#if defined(__GLIBC__)
  malloc_trim(0);
#endif
}

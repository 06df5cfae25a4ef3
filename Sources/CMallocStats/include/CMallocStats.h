#ifndef CMALLOCSTATS_H
#define CMALLOCSTATS_H

#include <stddef.h>

/// Bytes currently allocated by malloc in this process (0 where the C library cannot tell).
size_t cmallocstats_allocated_bytes(void);

/// Hands memory malloc keeps but no block uses back to the system, where the C library can.
void cmallocstats_release_free_memory(void);

#endif

#ifndef CALLOCATIONCOUNTER_H
#define CALLOCATIONCOUNTER_H

/// Whether this build counts allocations (not under sanitizers, which replace malloc).
int allocation_counter_enabled(void);
/// Calls to malloc, calloc, realloc (of a new block), posix_memalign and aligned_alloc so far.
long long allocation_counter_allocations(void);
/// Calls to free of a non-null pointer so far.
long long allocation_counter_frees(void);

#endif

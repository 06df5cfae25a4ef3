// Counts heap allocations by interposing the C allocator in the executable that links this
// target (symbols in the main executable take precedence over libc's). Compiled out under
// sanitizers, which install their own allocator.
#include "CAllocationCounter.h"

#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define ALLOCATION_COUNTER_DISABLED 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define ALLOCATION_COUNTER_DISABLED 1
#endif

#if defined(__linux__) && !defined(ALLOCATION_COUNTER_DISABLED)
#include <errno.h>
#include <stddef.h>

static long long allocations = 0;
static long long frees = 0;

extern void *__libc_malloc(size_t size);
extern void *__libc_calloc(size_t count, size_t size);
extern void *__libc_realloc(void *pointer, size_t size);
extern void *__libc_memalign(size_t alignment, size_t size);
extern void __libc_free(void *pointer);

void *malloc(size_t size) {
  __atomic_add_fetch(&allocations, 1, __ATOMIC_RELAXED);
  return __libc_malloc(size);
}

void *calloc(size_t count, size_t size) {
  __atomic_add_fetch(&allocations, 1, __ATOMIC_RELAXED);
  return __libc_calloc(count, size);
}

void *realloc(void *pointer, size_t size) {
  if (pointer == NULL) __atomic_add_fetch(&allocations, 1, __ATOMIC_RELAXED);
  return __libc_realloc(pointer, size);
}

int posix_memalign(void **result, size_t alignment, size_t size) {
  __atomic_add_fetch(&allocations, 1, __ATOMIC_RELAXED);
  void *pointer = __libc_memalign(alignment, size);
  if (pointer == NULL) return ENOMEM;
  *result = pointer;
  return 0;
}

void *aligned_alloc(size_t alignment, size_t size) {
  __atomic_add_fetch(&allocations, 1, __ATOMIC_RELAXED);
  return __libc_memalign(alignment, size);
}

void free(void *pointer) {
  if (pointer != NULL) __atomic_add_fetch(&frees, 1, __ATOMIC_RELAXED);
  __libc_free(pointer);
}

int allocation_counter_enabled(void) { return 1; }
long long allocation_counter_allocations(void) {
  return __atomic_load_n(&allocations, __ATOMIC_RELAXED);
}
long long allocation_counter_frees(void) { return __atomic_load_n(&frees, __ATOMIC_RELAXED); }

#else

int allocation_counter_enabled(void) { return 0; }
long long allocation_counter_allocations(void) { return 0; }
long long allocation_counter_frees(void) { return 0; }

#endif

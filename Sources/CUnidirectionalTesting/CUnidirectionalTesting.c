#include "CUnidirectionalTesting.h"

#include <pthread.h>
#include <stddef.h>

#if __has_attribute(swiftcall)
#define SWIFT_CC __attribute__((swiftcall))
#else
#define SWIFT_CC
#endif

// From the Swift runtime (swift/Runtime/Concurrency.h): the hook `swift_task_enqueueGlobal`
// calls, if set, with the job and the default implementation.
typedef SWIFT_CC void (*enqueue_global_original)(void *job);
typedef SWIFT_CC void (*enqueue_global_hook)(void *job, enqueue_global_original original);
extern enqueue_global_hook swift_task_enqueueGlobal_hook;

static __thread void *capturing_context = NULL;
static cunidirectionaltesting_capture capture_job = NULL;
static enqueue_global_hook previous_hook = NULL;
static pthread_once_t install_once = PTHREAD_ONCE_INIT;
static cunidirectionaltesting_capture pending_capture = NULL;

static SWIFT_CC void enqueue_hook(void *job, enqueue_global_original original) {
  void *context = capturing_context;
  if (context != NULL) {
    capture_job(context, job);
  } else if (previous_hook != NULL) {
    previous_hook(job, original);
  } else {
    original(job);
  }
}

static void install(void) {
  capture_job = __atomic_load_n(&pending_capture, __ATOMIC_ACQUIRE);
  previous_hook = swift_task_enqueueGlobal_hook;
  swift_task_enqueueGlobal_hook = enqueue_hook;
}

void cunidirectionaltesting_install_enqueue_hook(cunidirectionaltesting_capture capture) {
  // NB: atomic: test executors are made on many threads at once, each passing the same function
  // (a plain store raced, as ThreadSanitizer reported); `install` runs once and reads it.
  cunidirectionaltesting_capture expected = NULL;
  __atomic_compare_exchange_n(&pending_capture, &expected, capture, 0, __ATOMIC_ACQ_REL,
                              __ATOMIC_ACQUIRE);
  pthread_once(&install_once, install);
}

void *cunidirectionaltesting_set_capturing_context(void *context) {
  void *previous = capturing_context;
  capturing_context = context;
  return previous;
}

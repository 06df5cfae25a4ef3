// Thread-local storage for Unidirectional: Swift has no thread-local variables, and
// `pthread_getspecific`/`pthread_setspecific` cost a library call each (~3 ns), which a store
// pays twice per reduce. A `__thread` variable read from these inline functions compiles to one
// instruction in the library that uses it.
#ifndef C_UNIDIRECTIONAL_H
#define C_UNIDIRECTIONAL_H

/// The dependencies a store installed for the reducer it is running on this thread (an
/// unretained pointer to a `DependencyBox`), or NULL.
extern __thread void *_Nullable cunidirectional_reducer_dependencies
  __attribute__((tls_model("initial-exec")));

static inline void *_Nullable cunidirectional_get_reducer_dependencies(void) {
  return cunidirectional_reducer_dependencies;
}

static inline void cunidirectional_set_reducer_dependencies(void *_Nullable value) {
  cunidirectional_reducer_dependencies = value;
}

/// The planner's scratch arrays of this thread (an unretained pointer to a `PlanScratch`, which a
/// thread-specific key's destructor releases when the thread exits), or NULL before its first use.
extern __thread void *_Nullable cunidirectional_plan_scratch
  __attribute__((tls_model("initial-exec")));

static inline void *_Nullable cunidirectional_get_plan_scratch(void) {
  return cunidirectional_plan_scratch;
}

static inline void cunidirectional_set_plan_scratch(void *_Nullable value) {
  cunidirectional_plan_scratch = value;
}

/// Whether an effect task started on this thread (`EffectStarts`) is running its synchronous part
/// here, nested in that start: nonzero until it first suspends or ends.
extern __thread int cunidirectional_running_started_here
  __attribute__((tls_model("initial-exec")));

static inline int cunidirectional_get_running_started_here(void) {
  return cunidirectional_running_started_here;
}

static inline void cunidirectional_set_running_started_here(int value) {
  cunidirectional_running_started_here = value;
}

#endif

// The Swift runtime's global-enqueue hook, for `withTestExecution`: while a thread drains a
// test executor that captures, every job that thread hands to the global executor (the first
// job of an unstructured `Task {}`, a task resuming off an actor) goes to that test executor
// instead, so tasks a test starts run on its one hand-drained executor. Other threads, and
// this thread when it is not draining, are untouched: the hook passes their jobs on.
#ifndef C_UNIDIRECTIONAL_TESTING_H
#define C_UNIDIRECTIONAL_TESTING_H

/// Receives a captured job: the context set for the thread, and the job.
typedef void (*cunidirectionaltesting_capture)(void *_Nonnull context, void *_Nonnull job);

/// Installs the hook once per process (chaining to any hook installed before it).
void cunidirectionaltesting_install_enqueue_hook(cunidirectionaltesting_capture _Nonnull capture);

/// Sets the capturing context of the calling thread (NULL: capture nothing); returns the
/// previous one.
void *_Nullable cunidirectionaltesting_set_capturing_context(void *_Nullable context);

#endif

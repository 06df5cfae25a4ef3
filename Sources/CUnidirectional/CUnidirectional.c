#include "CUnidirectional.h"

__thread void *_Nullable cunidirectional_reducer_dependencies = 0;
__thread void *_Nullable cunidirectional_plan_scratch = 0;
__thread int cunidirectional_running_started_here = 0;

#include "CUnidirectional.h"

__thread void *_Nullable cunidirectional_reducer_dependencies = 0;

/* explain.c - placeholder */
#include "plan_int.h"

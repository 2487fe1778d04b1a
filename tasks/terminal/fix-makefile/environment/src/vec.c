#include <math.h>

#include "vec.h"

double vec_norm(vec2 v) { return sqrt(v.x * v.x + v.y * v.y); }

double vec_sum(vec2 v) { return v.x + v.y; }

#include <math.h>
#include "vec.h"

double vec_norm(vec3 a) { return sqrt(vec_dot(a, a)); }

vec3 vec_normalize(vec3 a)
{
    double n = vec_norm(a);
    return n == 0.0 ? a : vec_scale(a, 1.0 / n);
}

#ifndef VEC_H
#define VEC_H

typedef struct {
    double x, y, z;
} vec3;

vec3 vec_add(vec3 a, vec3 b);
vec3 vec_scale(vec3 a, double k);
double vec_dot(vec3 a, vec3 b);
vec3 vec_cross(vec3 a, vec3 b);
double vec_norm(vec3 a);
vec3 vec_normalize(vec3 a);

#endif

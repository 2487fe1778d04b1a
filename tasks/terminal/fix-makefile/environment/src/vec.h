#ifndef VEC_H
#define VEC_H

typedef struct {
    double x;
    double y;
} vec2;

double vec_norm(vec2 v);
double vec_sum(vec2 v);

#endif

#include <stdio.h>
#include <stdlib.h>

#include "vec.h"

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s X Y\n", argv[0]);
        return 2;
    }
    vec2 v = {strtod(argv[1], NULL), strtod(argv[2], NULL)};
    printf("dist=%.3f sum=%.3f\n", vec_norm(v), vec_sum(v));
    return 0;
}

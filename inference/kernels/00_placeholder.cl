/* placeholder until the real kernels land */
__kernel void placeholder(__global float *x) { x[get_global_id(0)] = 0.0f; }

/* amx.h - AMX tiles for the CPU backend's Q4_K products: whether this
 * process may use them, and the request for them. Apart from matmul.c and
 * matmul_kernel.c so that neither reads the other's state. */
#ifndef INFER_AMX_H
#define INFER_AMX_H

/* The CPU has amx-int8 and the kernel let this process have the tile
 * state (after matmul_want_amx); the v4vnni build then takes batched Q4_K
 * products 16 tokens at a time through TDPBSUD. */
extern int matmul_amx_ready;

/* Asks Linux for the tile state, once a process (only one that multiplies
 * Q4_K: the grant enlarges every signal frame). Safe from any thread. */
void matmul_want_amx(void);

#endif

/* amx.c - the AMX tile grant (see amx.h): asked for by the CPU backend
 * (matmul_want_amx), read by the kernels (matmul_amx_ready). */
#include <pthread.h>
#include "backend/cpu/amx.h"

int matmul_amx_ready;

#if defined(__x86_64__) && defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#define ARCH_REQ_XCOMP_PERM 0x1023 /* asm/prctl.h: Linux hands out AMX state on request */
#define XFEATURE_XTILEDATA 18

/* AMX where the CPU has amx-int8 and Linux grants the tile data (without
 * the grant the first tile instruction is a SIGILL). Asked for only by a
 * process that multiplies Q4_K: the grant enlarges every signal frame of
 * the process. */
static void amx_request(void)
{
	__builtin_cpu_init();
	matmul_amx_ready = __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("amx-int8") &&
			   __builtin_cpu_supports("amx-tile") &&
			   syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0;
}
#else
static void amx_request(void)
{
}
#endif

void matmul_want_amx(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;

	pthread_once(&once, amx_request);
}

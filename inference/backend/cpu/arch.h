/* arch.h - what the CPU backend asks of the ISA, in one place so the rest
 * reads portable. On x86-64 the hot functions that are not products are
 * cloned per level, as the products are built per level (matmul_kernel.c),
 * and a spin wait pauses; elsewhere one build and a plain spin (aarch64's
 * yield hint). A cloned function stays static in the file that calls it:
 * GCC gives a global one's resolver default visibility, a symbol libinfer
 * would export. */
#ifndef INFER_CPU_ARCH_H
#define INFER_CPU_ARCH_H

#if defined(__x86_64__)
#define CPU_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#define cpu_relax() __builtin_ia32_pause()
#elif defined(__aarch64__)
#define CPU_CLONES
#define cpu_relax() __asm__ volatile("yield")
#else
#define CPU_CLONES
#define cpu_relax() ((void)0)
#endif

#endif

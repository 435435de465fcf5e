/* maps.bpf.h - small map helpers the BPF programs share. */
#ifndef SPANTRACE_MAPS_BPF_H
#define SPANTRACE_MAPS_BPF_H

#include <bpf/bpf_helpers.h>

#ifndef EEXIST
#define EEXIST 17
#endif

/* The entry for key, created from init if it is missing. NULL when the map
 * is full (or the key was deleted between the insert and the lookup). */
static __always_inline void *lookup_or_init(void *map, const void *key, const void *init)
{
	void *val = bpf_map_lookup_elem(map, key);
	/* int, not long: the helper returns the map op's int, which the
	 * compiler may not sign-extend, and -EEXIST would then read as
	 * another error (libbpf-tools' maps.bpf.h says the same) */
	int err;

	if (val)
		return val;
	err = bpf_map_update_elem(map, key, init, BPF_NOEXIST);
	if (err && err != -EEXIST)
		return 0;
	return bpf_map_lookup_elem(map, key);
}

/* *p = max(*p, v) against concurrent writers on other CPUs. A writer that
 * loses four races in a row to larger values has nothing left to store. */
static __always_inline void atomic_max(__u64 *p, __u64 v)
{
	__u64 seen = *p;

	for (int i = 0; i < 4 && v > seen; i++) {
		__u64 prev = __sync_val_compare_and_swap(p, seen, v);
		if (prev == seen)
			return;
		seen = prev;
	}
}

#endif

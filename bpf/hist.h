/* hist.h - the one histogram definition: log-linear buckets of u64 values
 * (nanoseconds), shared by the BPF aggregation, `top`, the record summary,
 * the metrics stream and the Prometheus buckets, so that all of them read
 * the same percentiles from the same counts.
 *
 * Values below HIST_SUB are exact (bucket v holds v). Above, each power of
 * two [2^m, 2^(m+1)) is split into HIST_SUB equal sub-buckets of width
 * 2^(m-HIST_SUB_BITS). A bucket is at most 1/HIST_SUB = 12.5% as wide as
 * its lower edge, so any value read back from a bucket is within 12.5% of
 * every value counted in it. The buckets cover all of u64: 496 of them.
 *
 * Plain C with no library calls: the BPF programs include it too. */
#ifndef SPANTRACE_HIST_H
#define SPANTRACE_HIST_H

#define HIST_SUB_BITS 3
#define HIST_SUB (1u << HIST_SUB_BITS)       /* sub-buckets per power of two */
#define HIST_OCTAVES 61                      /* [2^3, 2^64) */
#define HIST_BUCKETS (HIST_SUB * (HIST_OCTAVES + 1))   /* 496 */

/* floor(log2(v)) for v > 0, without a count-leading-zeros instruction
 * (BPF has none), so both sides compute it the same way. */
static inline unsigned hist_log2(__u64 v)
{
	unsigned r = 0, shift;

	shift = (v > 0xFFFFFFFFULL) << 5; v >>= shift; r |= shift;
	shift = (v > 0xFFFF) << 4; v >>= shift; r |= shift;
	shift = (v > 0xFF) << 3; v >>= shift; r |= shift;
	shift = (v > 0xF) << 2; v >>= shift; r |= shift;
	shift = (v > 0x3) << 1; v >>= shift; r |= shift;
	return r | (unsigned)(v >> 1);
}

/* The bucket that counts v. */
static inline unsigned hist_bucket(__u64 v)
{
	unsigned shift, b;

	if (v < HIST_SUB)
		return (unsigned)v;
	shift = hist_log2(v) - HIST_SUB_BITS;
	b = ((shift + 1) << HIST_SUB_BITS) | (unsigned)((v >> shift) & (HIST_SUB - 1));
	return b < HIST_BUCKETS ? b : HIST_BUCKETS - 1;  /* always below; says so to the verifier */
}

/* The smallest value bucket b counts. */
static inline __u64 hist_bucket_low(unsigned b)
{
	unsigned shift;

	if (b < HIST_SUB)
		return b;
	shift = (b >> HIST_SUB_BITS) - 1;
	return (__u64)(HIST_SUB + (b & (HIST_SUB - 1))) << shift;
}

/* The largest value bucket b counts (inclusive). Prometheus' `le` of
 * bucket b is this value. */
static inline __u64 hist_bucket_high(unsigned b)
{
	if (b + 1 >= HIST_BUCKETS)
		return ~0ULL;
	return hist_bucket_low(b + 1) - 1;
}

#endif

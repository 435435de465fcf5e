/* spantrace/spans.h - the public header for engines that want spans of their
 * own under spantrace, without our probe vocabulary: depends only on
 * <sys/sdt.h> (Debian: systemtap-sdt-dev). Each span is a pair of standard
 * USDT probes, NAME_begin and NAME_end, in a provider you choose:
 *
 *   #include <spantrace/spans.h>
 *   SPANTRACE_BEGIN(myengine, decode);
 *   ... the work ...
 *   SPANTRACE_END(myengine, decode);
 *
 * and trace them, from outside, by pid or by command, with:
 *
 *   spantrace record --span usdt:PATH:myengine:decode_begin,decode_end:decode ...
 *
 * Spans may nest (each thread has its own stack); a span's end closes the
 * innermost open span of the same name. Unattached, each probe is a nop.
 * SPANTRACE_BEGIN1/END1 pass one integer (an id, a size) for other tools;
 * spantrace's matching does not read it. */
#ifndef SPANTRACE_SPANS_H
#define SPANTRACE_SPANS_H

#include <sys/sdt.h>

#define SPANTRACE_BEGIN(provider, name) DTRACE_PROBE(provider, name##_begin)
#define SPANTRACE_END(provider, name) DTRACE_PROBE(provider, name##_end)
#define SPANTRACE_BEGIN1(provider, name, arg) DTRACE_PROBE1(provider, name##_begin, arg)
#define SPANTRACE_END1(provider, name, arg) DTRACE_PROBE1(provider, name##_end, arg)

#endif

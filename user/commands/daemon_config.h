/* daemon_config.h - `spantrace daemon` settings from flags and SPANTRACE_*
 * environment variables (a flag beats its variable). A pure function of
 * argv and envp, so it can be unit-tested and fuzzed.
 *
 *   flag               variable                    default
 *   --binary PATH      SPANTRACE_BINARY            (this or -p is required)
 *   -p, --pid PID      -                           every process of the binary
 *   --all-engines      -                           host mode: every process on the host
 *                                                  mapping a file with `infer` probes
 *   --listen A:P       SPANTRACE_LISTEN            127.0.0.1:9464
 *   --jsonl-dir DIR    SPANTRACE_JSONL_DIR         none: no tail capture
 *   --slow-ms X        SPANTRACE_SLOW_MS           -
 *   --slow-pct P       SPANTRACE_SLOW_PCT          99 (when neither is given)
 *   --interval SEC     SPANTRACE_INTERVAL_SECS     5
 *   --file-max SIZE    SPANTRACE_FILE_MAX_BYTES    16M
 *   --total-max SIZE   SPANTRACE_TOTAL_MAX_BYTES   256M
 *   --retain N         SPANTRACE_RETAIN_FILES      16
 *   --level L          SPANTRACE_LEVEL             coarse (or detail)
 *   --expire SEC       SPANTRACE_EXPIRE_SECS       3 intervals, at least 30: an exited
 *                                                  process's series and map entries go
 *   --duration SEC     -                           until SIGTERM/SIGINT
 *   --otlp URL         SPANTRACE_OTLP_ENDPOINT     none: no OTLP metrics
 *   -q, --quiet        -                           log start and stop
 *   -v, --verbose      -                           (twice: libbpf too)
 * SIZE is bytes with an optional K, M or G suffix (powers of 1024). --level,
 * --duration, -q and -v are the options every command shares
 * (core/options.h), parsed by the same functions. */
#ifndef SPANTRACE_DAEMON_CONFIG_H
#define SPANTRACE_DAEMON_CONFIG_H

#include <stddef.h>
#include <stdint.h>
#include "core/engines.h"
#include "core/options.h"
#include "output/httpd.h"

struct daemon_config {
	const char *binary;      /* points into argv or envp; NULL with -p only */
	int pid;                 /* 0 = all processes of the binary */
	enum engine_id engine;   /* --engine; ENGINE_AUTO: whichever the target has */
	int all_engines;         /* host mode: no binary, no pid */
	struct listen_addr listen;
	const char *jsonl_dir;   /* NULL: no tail capture */
	const char *otlp;        /* NULL: no OTLP export */
	double slow_ms;          /* < 0 when the threshold is a percentile */
	double slow_pct;         /* in (0, 100) when slow_ms < 0 */
	double interval_secs;
	double expire_secs;      /* 0: 3 intervals, at least 30 s */
	uint64_t file_max_bytes, total_max_bytes;
	unsigned retain_files;
	struct common_opts common;  /* level, duration, quiet */
	int verbose;             /* -v: debug log (twice: libbpf's too) */
	int opencl;              /* --opencl: the OpenCL ICD loader's calls too */
	int no_http;             /* --no-http: not the processes' sockets */
	int spans;               /* --span specs given (core/userspans.h holds them) */
};

enum { DAEMON_CONFIG_OK = 0, DAEMON_CONFIG_HELP = 1, DAEMON_CONFIG_ERROR = -1 };

/* argv[0] is the subcommand name ("daemon"). Returns DAEMON_CONFIG_OK,
 * DAEMON_CONFIG_HELP (for -h/--help), or DAEMON_CONFIG_ERROR with a
 * one-line reason in err. */
int daemon_config_parse(struct daemon_config *c, int argc, char **argv, char **envp,
			char *err, size_t errlen);

extern const char daemon_config_usage[];

#endif

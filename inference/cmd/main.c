/* main.c - the engine's command line: one generation, --serve for one
 * request per stdin line, or --http for the OpenAI-compatible server
 * (serve/http.c) over the batching engine (serve/serve.c). Thin: the work
 * is in engine/ and serve/. */
#include <errno.h>
#include <pthread.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "engine/engine.h"
#include "serve/http.h"
#include "serve/llama_cli.h"
#include "serve/serve.h"
#include "base/trace.h"
#include "version.h"

typedef struct {
	EngineOptions eng;
	const char *prompt;
	const char *stats_path;
	const char *margins_path;  /* --logit-margins: each token's top-2 gap */
	int ids;    /* print token ids instead of text */
	int serve;
	const char *http;    /* [ADDR:]PORT: the HTTP engine */
	HttpOptions http_opt;
	ServeOptions serve_opt;
} Args;

static volatile sig_atomic_t stop_requested;

static void on_signal(int sig)
{
	(void)sig;
	stop_requested = 1;
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: infer MODEL [options]   (infer --version: the build)\n"
		"  -z TOKENIZER    llama2.c tokenizer (needed for text prompts and text output)\n"
		"  -n STEPS        positions per request, prompt included (default 256; 0 = seq_len)\n"
		"  -t TEMP         temperature, 0 = greedy (default 1.0)\n"
		"  -p TOPP         top-p nucleus threshold (default 0.9)\n"
		"  -s SEED         random seed (default: the time)\n"
		"  -i PROMPT       prompt text\n"
		"  -b BACKEND      cpu, opencl or auto (default auto: for a GGUF file cpu, unless\n"
		"                  OpenCL has a GPU or --cl-* names a device; else opencl)\n"
		"  --cl-platform N, --cl-device N   OpenCL platform/device index\n"
		"  --cl-launch forward|phases  force one kernel per forward pass, or one per\n"
		"                  phase. Default: phases while a tracer asks for op detail or on\n"
		"                  a GPU, else forward (CPU devices only; of the layers alone where\n"
		"                  the embedding or classifier has another type than the layers)\n"
		"  --threads N     cpu backend threads (default: OpenMP's; see OMP_WAIT_POLICY)\n"
		"  --kv-type auto|f32|f16  the KV cache's element type. f16 halves its bytes, as\n"
		"                  llama.cpp's default; f32 is the reference's. Default auto: f16\n"
		"                  for F16 and quantized layers, f32 where a layer has F32\n"
		"  --ids           print generated token ids, not text\n"
		"  --serve         one prompt per stdin line, one completion per stdout line\n"
		"  --stats FILE    write the engine's own statistics as JSON\n"
		"  --logit-margins FILE  one line per generated token: its index, id, the\n"
		"                  runner-up's id and the gap between their logits. At -t 0 a\n"
		"                  small gap is a near-tie another implementation's rounding can\n"
		"                  break the other way (one generation: not with --serve or --http)\n"
		"  --http [ADDR:]PORT  serve OpenAI-style completions over HTTP (default address\n"
		"                  127.0.0.1; port 0 picks a free one, printed on stderr)\n"
		"  --max-seqs N    sequences batched at once (default 8)\n"
		"  --max-batch-tokens N  tokens per engine step (default: the backend's limit)\n"
		"  --kv-blocks N   KV cache blocks (default: max-seqs full-length sequences)\n"
		"  --block-size N  positions per KV block (default 16)\n"
		"  --prefix-cache N  finished requests whose KV a later prompt with the same\n"
		"                  start reuses (default: max-seqs; 0: off)\n"
		"  --chat-template NAME  the chat prompt's template family, over the one the GGUF\n"
		"                  file's tokenizer.chat_template names: llama2, chatml, llama3,\n"
		"                  mistral, zephyr, gemma or phi3 (/v1/chat/completions)\n"
		"  --max-conns N   connections served at once, more get 503 (default 64)\n"
		"  --max-body N    largest request body in bytes, larger get 413 (default 1048576)\n"
		"  --cors-origin O the Access-Control-Allow-Origin of every response (default *:\n"
		"                  a browser's Origin echoed, as llama-server)\n"
		"  --ctx-size N    positions a request may use (at most the model's) and, without\n"
		"                  --kv-blocks, the KV pool's size in all (default: the model's)\n"
		"  --alias NAME    the model's name in /v1/models (default: the file's)\n"
		"llama-server's command line also starts the HTTP engine: -m MODEL, --host H\n"
		"(default 127.0.0.1), --port P (8080), -c N (--ctx-size), -np N (--max-seqs),\n"
		"-t N (--threads), -b N (--max-batch-tokens), -a NAME, --chat-template, -ngl N\n"
		"(0: the CPU backend), --jinja and -cb (accepted); -b is then spelled --backend\n"
		"  -h              this help\n");
}

static int bad_arg(const char *opt, const char *val, const char *why)
{
	fprintf(stderr, "infer: %s '%s': %s\n", opt, val, why);
	return -1;
}

static int usage_error(const char *why)
{
	fprintf(stderr, "infer: %s\n", why);
	return -1;
}

static int parse_int(const char *opt, const char *s, long lo, long hi, int *out)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || end == s || *end)
		return bad_arg(opt, s, "not an integer");
	if (v < lo || v > hi)
		return bad_arg(opt, s, "out of range");
	*out = (int)v;
	return 0;
}

static int parse_float(const char *opt, const char *s, float lo, float hi, float *out)
{
	char *end;
	float v;

	errno = 0;
	v = strtof(s, &end);
	if (errno || end == s || *end || !isfinite(v))
		return bad_arg(opt, s, "not a number");
	if (v < lo || v > hi)
		return bad_arg(opt, s, "out of range");
	*out = v;
	return 0;
}

static int parse_seed(const char *s, uint64_t *out)
{
	char *end;
	unsigned long long v;

	errno = 0;
	if (*s == '-')
		return bad_arg("-s", s, "must not be negative");
	v = strtoull(s, &end, 10);
	if (errno || end == s || *end)
		return bad_arg("-s", s, "not an integer");
	/* run.c: 0 means "seed from the clock" */
	*out = v ? v : (uint64_t)time(NULL);
	return 0;
}

/* --http [ADDR:]PORT */
static int parse_listen(Args *a, const char *val)
{
	static char addr[64];
	const char *colon = strrchr(val, ':');

	a->http = val;
	if (colon) {
		size_t n = (size_t)(colon - val);

		if (n == 0 || n >= sizeof(addr))
			return bad_arg("--http", val, "expected [ADDR:]PORT");
		memcpy(addr, val, n);
		addr[n] = '\0';
		a->http_opt.addr = addr;
	}
	return parse_int("--http", colon ? colon + 1 : val, 0, 65535, &a->http_opt.port);
}

/* The HTTP engine's options; 0 when opt is not one of them. */
static int parse_serving(Args *a, const char *opt, const char *val)
{
	int body = 0, rc;

	if (!strcmp(opt, "--http"))
		rc = parse_listen(a, val);
	else if (!strcmp(opt, "--max-seqs"))
		rc = parse_int(opt, val, 1, 64, &a->serve_opt.max_seqs);
	else if (!strcmp(opt, "--max-batch-tokens"))
		rc = parse_int(opt, val, 1, 1 << 20, &a->serve_opt.max_batch_tokens);
	else if (!strcmp(opt, "--kv-blocks"))
		rc = parse_int(opt, val, 1, 1 << 24, &a->serve_opt.kv_blocks);
	else if (!strcmp(opt, "--block-size"))
		rc = parse_int(opt, val, 1, 4096, &a->serve_opt.block_size);
	else if (!strcmp(opt, "--prefix-cache"))
		rc = parse_int(opt, val, 0, 64, &a->serve_opt.prefix_entries);
	else if (!strcmp(opt, "--max-conns"))
		rc = parse_int(opt, val, 1, 4096, &a->http_opt.max_conns);
	else if (!strcmp(opt, "--chat-template")) {
		char why[160];

		snprintf(why, sizeof(why), "not a template family this engine knows (%s)",
			 chat_family_list());
		a->eng.chat_template = val;
		rc = chat_family_by_name(val) == CHAT_NONE ? bad_arg(opt, val, why) : 0;
	}
	else if (!strcmp(opt, "--max-body")) {
		rc = parse_int(opt, val, 64, 1 << 30, &body);
		a->http_opt.max_body = (size_t)body;
	} else if (!strcmp(opt, "--ctx-size"))
		rc = parse_int(opt, val, 0, 1 << 24, &a->serve_opt.ctx_size);
	else if (!strcmp(opt, "--alias")) {
		a->http_opt.model_name = val;
		rc = *val ? 0 : bad_arg(opt, val, "an empty model name");
	} else if (!strcmp(opt, "--cors-origin")) {
		a->http_opt.cors_origin = val;
		rc = !*val || strpbrk(val, "\r\n") ? bad_arg(opt, val, "not an origin") : 0;
	} else
		return 0;
	return rc < 0 ? -1 : 1;
}

/* *out = the index of val among names (n; NULL entries match nothing), or
 * -1 with want as the complaint. */
static int parse_choice(const char *opt, const char *val, const char *const *names, int n,
			const char *want, int *out)
{
	for (int i = 0; i < n; i++)
		if (names[i] && !strcmp(val, names[i])) {
			*out = i;
			return 1;
		}
	return bad_arg(opt, val, want);
}

static int parse_cl_launch(const char *opt, const char *val, enum cl_launch *out)
{
	static const char *const names[] = { [CL_LAUNCH_FORWARD] = "forward",
					     [CL_LAUNCH_PHASES] = "phases" };
	int i, rc = parse_choice(opt, val, names, (int)(sizeof(names) / sizeof(*names)),
				  "expected forward or phases", &i);

	if (rc > 0)
		*out = (enum cl_launch)i;
	return rc;
}

static int parse_kv_type(const char *opt, const char *val, enum kv_type *out)
{
	static const char *const names[] = { [KV_F32] = "f32", [KV_F16] = "f16",
					     [KV_AUTO] = "auto" };
	int i, rc = parse_choice(opt, val, names, (int)(sizeof(names) / sizeof(*names)),
				  "expected auto, f32 or f16", &i);

	if (rc > 0)
		*out = (enum kv_type)i;
	return rc;
}

/* Options that take a value; returns -1 on a bad one, 0 when not ours. */
static int parse_valued(Args *a, const char *opt, const char *val)
{
	if (!strcmp(opt, "-z"))
		a->eng.tokenizer_path = val;
	else if (!strcmp(opt, "-n"))
		return parse_int(opt, val, 0, 1L << 30, &a->eng.steps) < 0 ? -1 : 1;
	else if (!strcmp(opt, "-t"))
		return parse_float(opt, val, 0.0f, 1e6f, &a->eng.temperature) < 0 ? -1 : 1;
	else if (!strcmp(opt, "-p"))
		return parse_float(opt, val, 0.0f, 1.0f, &a->eng.topp) < 0 ? -1 : 1;
	else if (!strcmp(opt, "-s"))
		return parse_seed(val, &a->eng.seed) < 0 ? -1 : 1;
	else if (!strcmp(opt, "-i"))
		a->prompt = val;
	else if (!strcmp(opt, "-b") || !strcmp(opt, "--backend"))
		a->eng.backend = val;
	else if (!strcmp(opt, "--cl-platform"))
		return parse_int(opt, val, 0, 1024, &a->eng.backend_opt.cl_platform) < 0 ? -1 : 1;
	else if (!strcmp(opt, "--cl-device"))
		return parse_int(opt, val, 0, 1024, &a->eng.backend_opt.cl_device) < 0 ? -1 : 1;
	else if (!strcmp(opt, "--cl-launch"))
		return parse_cl_launch(opt, val, &a->eng.backend_opt.cl_launch);
	else if (!strcmp(opt, "--threads"))
		return parse_int(opt, val, 1, 1024, &a->eng.backend_opt.threads) < 0 ? -1 : 1;
	else if (!strcmp(opt, "--kv-type"))
		return parse_kv_type(opt, val, &a->eng.backend_opt.kv_type);
	else if (!strcmp(opt, "--stats"))
		a->stats_path = val;
	else if (!strcmp(opt, "--logit-margins"))
		a->margins_path = val;
	else
		return parse_serving(a, opt, val);
	return 1;
}

/* 0 ok, 1 help or version shown, -1 bad arguments (message printed). */
static int parse_args(Args *a, int argc, char **argv)
{
	*a = (Args){ .eng = { .backend = "auto", .temperature = 1.0f, .topp = 0.9f,
			      .steps = 256, .seed = (uint64_t)time(NULL),
			      .backend_opt = { .cl_platform = -1, .cl_device = -1, .kv_type = KV_AUTO } },
		    .http_opt = { .addr = "127.0.0.1", .max_conns = 64, .max_body = 1 << 20 },
		    .serve_opt = { .max_seqs = 8, .block_size = 16, .prefix_entries = -1 } };
	for (int i = 1; i < argc; i++) {
		const char *opt = argv[i];
		int rc;

		if (!strcmp(opt, "-h") || !strcmp(opt, "--help")) {
			usage(stdout);
			return 1;
		}
		if (!strcmp(opt, "--version")) {
			printf("infer %s\n", SPANTRACE_VERSION);
			return 1;
		}
		if (!strcmp(opt, "--ids")) {
			a->ids = 1;
			continue;
		}
		if (!strcmp(opt, "--serve")) {
			a->serve = 1;
			continue;
		}
		if (opt[0] != '-' || opt[1] == '\0') {
			if (a->eng.model_path)
				return bad_arg("argument", opt, "a second model path");
			a->eng.model_path = opt;
			continue;
		}
		if (i + 1 >= argc)
			return bad_arg("option", opt, "needs a value (or is unknown)");
		rc = parse_valued(a, opt, argv[i + 1]);
		if (rc < 0)
			return -1;
		if (rc == 0)
			return bad_arg("option", opt, "unknown (see -h)");
		i++;
	}
	if (!a->eng.model_path)
		return usage_error("no MODEL given (see -h)");
	if (a->http && (a->serve || a->prompt))
		return usage_error("--http serves requests itself: no -i or --serve with it");
	if (a->serve && a->prompt)
		return bad_arg("-i", a->prompt, "--serve reads prompts from stdin");
	if (a->margins_path && (a->serve || a->http))
		return bad_arg("--logit-margins", a->margins_path, "is for one generation: not with --serve or --http");
	return 0;
}

/* ---- printing tokens as they come ---- */

typedef struct {
	const Engine *engine;
	int ids;
	int one_line;  /* serve: a completion must not contain newlines */
	int printed;
	FILE *margins; /* --logit-margins, or NULL */
} Printer;

/* The line --logit-margins writes for the token just drawn from e->logits
 * (sampling leaves them as the forward wrote them). */
static void print_margin(FILE *f, const Engine *e, int index, int token)
{
	const float *l = e->logits;
	int n = e->model.config.vocab_size, best = 0, second = -1;

	for (int i = 1; i < n; i++)
		if (l[i] > l[best]) {
			second = best;
			best = i;
		} else if (second < 0 || l[i] > l[second])
			second = i;
	if (second < 0)
		second = best;  /* a vocabulary of one */
	fprintf(f, "%d %d %d %.6g\n", index, token, second, (double)(l[best] - l[second]));
}

static void print_piece(const char *piece, int one_line)
{
	if (!piece_is_printable(piece))
		return;
	if (!one_line) {
		fputs(piece, stdout);
		return;
	}
	for (const char *c = piece; *c; c++)
		putchar(*c == '\n' || *c == '\r' ? ' ' : *c);
}

static int on_token(void *ctx, int prev, int token)
{
	Printer *p = ctx;

	if (p->margins)
		print_margin(p->margins, p->engine, p->printed, token);
	if (p->ids)
		printf(p->printed ? " %d" : "%d", token);
	else
		print_piece(tokenizer_decode(&p->engine->tokenizer, prev, token), p->one_line);
	p->printed++;
	if (!p->one_line)
		fflush(stdout);
	return stop_requested;
}

/* Like run.c, a one-shot text run prints the prompt before its continuation. */
static void echo_prompt(const Engine *e, const EnginePrompt *p)
{
	for (int i = 1; i < p->n; i++)
		print_piece(tokenizer_decode(&e->tokenizer, p->ids[i - 1], p->ids[i]), 0);
}

/* One request: prompt text (NULL = BOS only) to stdout. */
static int run_request(Engine *e, const Args *a, FILE *margins, uint64_t req, const char *text,
		       uint64_t *tokens, InferError *err)
{
	EnginePrompt prompt;
	Printer printer = { e, a->ids, a->serve, 0, margins };
	int generated = 0, rc;

	rc = text && (*text || !a->ids) ? engine_encode(e, text, &prompt, err)
					: engine_prompt_bos(&prompt, err);
	if (rc == 0 && !a->ids && !a->serve)
		echo_prompt(e, &prompt);
	if (rc == 0) {
		rc = engine_generate(e, req, &prompt, on_token, &printer, &generated, err);
		engine_prompt_free(&prompt);
	}
	*tokens += (uint64_t)generated;
	/* serve keeps one output line per request, failed or not */
	if (rc == 0 || a->serve)
		putchar('\n');
	fflush(stdout);
	return rc;
}

static int serve(Engine *e, const Args *a, uint64_t *tokens)
{
	char *line = NULL;
	size_t cap = 0;
	ssize_t len;
	uint64_t req = 0;

	while (!stop_requested && (len = getline(&line, &cap, stdin)) >= 0) {
		InferError err;

		while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r'))
			line[--len] = '\0';
		if (run_request(e, a, NULL, ++req, line, tokens, &err) < 0)
			fprintf(stderr, "infer: request %llu: %s\n", (unsigned long long)req, err.msg);
	}
	free(line);
	return 0;
}

static void install_signals(void)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;  /* no SA_RESTART: a blocked read returns */
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
}

/* ---- the HTTP engine ---- */

/* Signals go to sigwait in the main thread: the engine and HTTP threads
 * start with them blocked. */
static void block_signals(sigset_t *set)
{
	sigemptyset(set);
	sigaddset(set, SIGINT);
	sigaddset(set, SIGTERM);
	pthread_sigmask(SIG_BLOCK, set, NULL);
	signal(SIGPIPE, SIG_IGN);
}

static const char *base_name(const char *path)
{
	const char *slash = strrchr(path, '/');

	return slash ? slash + 1 : path;
}

static int run_http(Args *a)
{
	Server srv;
	HttpServer *http = NULL;
	InferError err;
	sigset_t set;
	int port = 0, sig = 0, rc = 0;
	uint64_t t0 = trace_now_ns();

	block_signals(&set);
	if (!a->http_opt.model_name)
		a->http_opt.model_name = base_name(a->eng.model_path);
	if (server_open(&srv, &a->eng, &a->serve_opt, &err) < 0) {
		fprintf(stderr, "infer: %s\n", err.msg);
		return 1;
	}
	if (server_start(&srv, &err) < 0 ||
	    http_start(&http, &srv, &a->http_opt, &port, &err) < 0) {
		fprintf(stderr, "infer: %s\n", err.msg);
		server_close(&srv);
		return 1;
	}
	fprintf(stderr, "infer: listening on http://%s:%d (%s backend, %d seqs, %d KV blocks of %d, %s, "
		"chat template %s)\n", a->http_opt.addr, port, srv.engine.ops->name, srv.opt.max_seqs,
		srv.opt.kv_blocks, srv.opt.block_size, backend_kv_type_name(srv.engine.kv_type),
		chat_family_name(srv.engine.chat.family));
	sigwait(&set, &sig);
	server_stop(&srv);  /* wakes every waiting response so it can end */
	http_stop(http);
	server_close(&srv);
	if (a->stats_path && trace_stats_write(a->stats_path, trace_now_ns() - t0, &err) < 0) {
		fprintf(stderr, "infer: %s\n", err.msg);
		rc = 1;
	}
	return rc;
}

static int infer_main(int argc, char **argv)
{
	Args a;
	Engine engine;
	InferError err;
	FILE *margins = NULL;
	uint64_t tokens = 0, t0, wall;
	int rc;

	rc = parse_args(&a, argc, argv);
	if (rc != 0)
		return rc > 0 ? 0 : 2;
	if (a.stats_path)
		trace_stats_enable();
	if (a.http)
		return run_http(&a);
	if (engine_open(&engine, &a.eng, &err) < 0) {
		fprintf(stderr, "infer: %s\n", err.msg);
		return 1;
	}
	/* checked once the model is open: a GGUF model brings its tokenizer */
	if (!a.ids && !engine.have_tokenizer) {
		engine_close(&engine);
		usage_error("text output needs a tokenizer: pass -z TOKENIZER (or --ids)");
		return 2;
	}
	if (a.margins_path && !(margins = fopen(a.margins_path, "w"))) {
		fprintf(stderr, "infer: --logit-margins %s: %s\n", a.margins_path, strerror(errno));
		engine_close(&engine);
		return 1;
	}
	install_signals();
	t0 = trace_now_ns();
	if (a.serve)
		rc = serve(&engine, &a, &tokens);
	else if ((rc = run_request(&engine, &a, margins, 1, a.prompt, &tokens, &err)) < 0)
		fprintf(stderr, "infer: %s\n", err.msg);
	wall = trace_now_ns() - t0;
	if (rc == 0 && wall > 0)
		fprintf(stderr, "achieved tok/s: %.2f (%llu tokens in %.3f s)\n",
			(double)tokens * 1e9 / (double)wall, (unsigned long long)tokens,
			(double)wall / 1e9);
	engine_close(&engine);
	if (margins && (ferror(margins) | fclose(margins))) {
		fprintf(stderr, "infer: --logit-margins %s: a write failed\n", a.margins_path);
		rc = -1;
	}
	if (a.stats_path && trace_stats_write(a.stats_path, wall, &err) < 0) {
		fprintf(stderr, "infer: %s\n", err.msg);
		rc = -1;
	}
	return rc < 0 ? 1 : 0;
}

/* llama-server's command line (-m FILE ...) is first spelled as infer's. */
int main(int argc, char **argv)
{
	char **targv = NULL, msg[256];
	int targc = 0, rc;

	if (!llama_cli_wanted(argc, argv))
		return infer_main(argc, argv);
	if (llama_cli_translate(argc, argv, stderr, &targv, &targc, msg, sizeof(msg)) < 0) {
		fprintf(stderr, "infer: %s\n", msg);
		return 2;
	}
	rc = infer_main(targc, targv);
	free(targv);
	return rc;
}

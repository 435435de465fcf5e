/* llama_cli.c - llama-server's command line in infer's spelling (see llama_cli.h). */
#include "serve/llama_cli.h"

#include <stdlib.h>
#include <string.h>

enum spell { SP_MODEL, SP_HOST, SP_PORT, SP_AS, SP_NOTE, SP_GPU_LAYERS };

/* One of llama-server's options: its spellings, what it becomes, whether
 * it takes a value, and for SP_NOTE what it means here. */
struct llama_opt {
	const char *names[4];
	enum spell spell;
	const char *ours;  /* SP_AS: infer's option */
	int valued;
	const char *note;  /* SP_NOTE */
};

static const struct llama_opt OPTS[] = {
	{ { "-m", "--model" }, SP_MODEL, NULL, 1, NULL },
	{ { "--host" }, SP_HOST, NULL, 1, NULL },
	{ { "--port" }, SP_PORT, NULL, 1, NULL },
	{ { "-c", "--ctx-size" }, SP_AS, "--ctx-size", 1, NULL },
	{ { "-np", "--parallel" }, SP_AS, "--max-seqs", 1, NULL },
	{ { "-t", "--threads", "-tb", "--threads-batch" }, SP_AS, "--threads", 1, NULL },
	{ { "-b", "--batch-size" }, SP_AS, "--max-batch-tokens", 1, NULL },
	{ { "-a", "--alias" }, SP_AS, "--alias", 1, NULL },
	{ { "--chat-template" }, SP_AS, "--chat-template", 1, NULL },
	{ { "-ngl", "--gpu-layers", "--n-gpu-layers" }, SP_GPU_LAYERS, NULL, 1, NULL },
	{ { "--jinja" }, SP_NOTE, NULL, 0,
	  "templates are rendered by family (the seven llama.cpp detects), as its Jinja renders them" },
	{ { "-cb", "--cont-batching" }, SP_NOTE, NULL, 0, "requests are always batched" },
	{ { "--no-webui" }, SP_NOTE, NULL, 0, "there is no web UI" },
};

static const struct llama_opt *find(const char *arg)
{
	for (size_t i = 0; i < sizeof(OPTS) / sizeof(OPTS[0]); i++)
		for (int k = 0; k < 4 && OPTS[i].names[k]; k++)
			if (!strcmp(arg, OPTS[i].names[k]))
				return &OPTS[i];
	return NULL;
}

int llama_cli_wanted(int argc, char *const *argv)
{
	for (int i = 1; i < argc; i++)
		if (!strcmp(argv[i], "-m") || !strcmp(argv[i], "--model"))
			return 1;
	return 0;
}

struct tr {
	char **out;
	int n;
	const char *host, *port;
};

static void push(struct tr *t, const char *a, const char *b)
{
	t->out[t->n++] = (char *)a;
	if (b)
		t->out[t->n++] = (char *)b;
}

/* -ngl 0 keeps every layer on the CPU, as llama-server's does; more is
 * the default backend, auto: OpenCL on a GPU or accelerator, else the
 * CPU, as llama-server offloads only to a GPU. */
static void gpu_layers(struct tr *t, const char *val, FILE *notes)
{
	if (!strcmp(val, "0")) {
		push(t, "--backend", "cpu");
		return;
	}
	if (notes)
		fprintf(notes, "infer: -ngl %s: the whole model runs on one backend, auto's: OpenCL "
			"on a GPU or accelerator, else the CPU (-ngl 0: the CPU)\n", val);
}

static int one(struct tr *t, const struct llama_opt *o, const char *arg, const char *val,
	       FILE *notes)
{
	switch (o->spell) {
	case SP_MODEL: push(t, val, NULL); break;
	case SP_HOST: t->host = val; break;
	case SP_PORT: t->port = val; break;
	case SP_AS: push(t, o->ours, val); break;
	case SP_GPU_LAYERS: gpu_layers(t, val, notes); break;
	case SP_NOTE:
		if (notes)
			fprintf(notes, "infer: %s: accepted; %s\n", arg, o->note);
		break;
	}
	return 0;
}

int llama_cli_translate(int argc, char *const *argv, FILE *notes, char ***out, int *outc,
			char *err, size_t errlen)
{
	/* argv[0], each argument at most once, --http, HOST:PORT and NULL;
	 * HOST:PORT's text after (its defaults are 14 bytes) */
	size_t slots = (size_t)argc + 4, text = 0;
	struct tr t = { .host = "127.0.0.1", .port = "8080" };
	char *hostport;

	for (int i = 1; i < argc; i++)
		text += strlen(argv[i]) + 1;
	t.out = malloc(slots * sizeof(char *) + text + 32);
	if (!t.out) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	push(&t, argv[0], NULL);
	for (int i = 1; i < argc; i++) {
		const struct llama_opt *o = find(argv[i]);

		if (!o) {
			push(&t, argv[i], NULL); /* infer's own, or refused by its parser */
			continue;
		}
		if (o->valued && i + 1 >= argc) {
			snprintf(err, errlen, "option '%s' needs a value", argv[i]);
			free(t.out);
			return -1;
		}
		one(&t, o, argv[i], o->valued ? argv[i + 1] : NULL, notes);
		i += o->valued;
	}
	hostport = (char *)(t.out + slots);
	snprintf(hostport, text + 32, "%s:%s", t.host, t.port);
	push(&t, "--http", hostport);
	t.out[t.n] = NULL;
	*out = t.out;
	*outc = t.n;
	return 0;
}

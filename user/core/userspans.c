/* userspans.c - the table of --span specs (see userspans.h); session_attach
 * (core/session_attach.c) attaches it, so the table links without libbpf. */
#include "core/userspans.h"

#include <argp.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "core/launch.h"
#include "spantrace.h"

#define NAME_MAX_LEN 31

static struct user_span spans[USER_SPAN_MAX];
static size_t nspans;

static int name_ok(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > NAME_MAX_LEN)
		return 0;
	return strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-") == n;
}

/* Splits s at each ':' into at most max fields; the count, or -1. */
static int split(char *s, char **f, int max)
{
	int n = 0;

	for (char *p = s; n < max; n++) {
		f[n] = p;
		p = strchr(p, ':');
		if (!p)
			return n + 1;
		*p++ = 0;
	}
	return -1;
}

static int copy(char *dst, size_t size, const char *src)
{
	return (size_t)snprintf(dst, size, "%s", src) >= size || !*src ? -1 : 0;
}

/* The fields after the type: PATH:FUNCTION[:NAME] or PATH:PROVIDER:BEGIN,END[:NAME]. */
static int fill(struct user_span *u, char **f, int n)
{
	char *comma;

	if (u->type == US_UPROBE) {
		if (n < 3 || n > 4 || copy(u->path, sizeof(u->path), f[1]) || copy(u->func, sizeof(u->func), f[2]))
			return -1;
		return copy(u->name, sizeof(u->name), n == 4 ? f[3] : f[2]);
	}
	if (n < 4 || n > 5 || !(comma = strchr(f[3], ',')))
		return -1;
	*comma = 0;
	if (copy(u->path, sizeof(u->path), f[1]) || copy(u->func, sizeof(u->func), f[2]) ||
	    copy(u->begin, sizeof(u->begin), f[3]) || copy(u->end, sizeof(u->end), comma + 1))
		return -1;
	return copy(u->name, sizeof(u->name), n == 5 ? f[4] : f[3]);
}

int user_span_add(const char *spec, char *err, size_t errlen)
{
	struct user_span u = { 0 };
	char buf[PATH_MAX + 512], *f[6];
	int n;

	if (nspans >= USER_SPAN_MAX) {
		snprintf(err, errlen, "--span: at most %d spans", USER_SPAN_MAX);
		return -1;
	}
	if (copy(buf, sizeof(buf), spec) || (n = split(buf, f, 6)) < 0 ||
	    (strcmp(f[0], "uprobe") && strcmp(f[0], "usdt"))) {
		snprintf(err, errlen, "--span '%s': want uprobe:PATH:FUNCTION or usdt:PATH:PROVIDER:BEGIN,END[:NAME]", spec);
		return -1;
	}
	u.type = strcmp(f[0], "uprobe") ? US_USDT : US_UPROBE;
	if (fill(&u, f, n)) {
		snprintf(err, errlen, "--span '%s': want %s", spec,
			 u.type == US_UPROBE ? "uprobe:PATH:FUNCTION[:NAME]" : "usdt:PATH:PROVIDER:BEGIN,END[:NAME]");
		return -1;
	}
	if (!name_ok(u.name)) {
		snprintf(err, errlen, "--span '%s': name '%s' must be 1..%d of [A-Za-z0-9_.-]", spec, u.name, NAME_MAX_LEN);
		return -1;
	}
	for (size_t i = 0; i < nspans; i++)
		if (!strcmp(spans[i].name, u.name)) {
			snprintf(err, errlen, "--span '%s': the name '%s' is already used", spec, u.name);
			return -1;
		}
	if (access(u.path, R_OK)) {
		snprintf(err, errlen, "--span '%s': %s: %s", spec, u.path, strerror(errno));
		return -1;
	}
	spans[nspans++] = u;
	return 0;
}

void user_span_option(struct argp_state *state, const char *spec, struct launch_opts *target)
{
	char err[PATH_MAX + 128];

	if (user_span_add(spec, err, sizeof(err)))
		argp_error(state, "%s", err);
	target->probes_optional = 1;
	/* one in llama.cpp: a command is watched for the libllama it may load (launch.c) */
	if (spans[nspans - 1].type == US_UPROBE && target->nspan_files < USER_SPAN_MAX)
		target->span_files[target->nspan_files++] = spans[nspans - 1].path;
}

const struct user_span *user_span_get(size_t i)
{
	return i < nspans ? &spans[i] : NULL;
}

size_t user_span_count(void)
{
	return nspans;
}

unsigned user_span_kind(size_t i)
{
	return USER_SPAN_BASE + (unsigned)i;
}

const char *user_span_name(unsigned kind)
{
	if (kind < USER_SPAN_BASE || kind - USER_SPAN_BASE >= nspans)
		return NULL;
	return spans[kind - USER_SPAN_BASE].name;
}

int span_kind_known(unsigned kind)
{
	return kind < SPAN_KIND_COUNT || user_span_name(kind) != NULL;
}

void user_spans_reset(void)
{
	nspans = 0;
}

/* chat.c - chat template families: detection, the common templates, and
 * their prompts rendered in C (see chat.h).
 *
 * Each render_* function is its family's template read as code, including
 * Jinja's whitespace handling as llama.cpp runs it (trim_blocks,
 * lstrip_blocks) and the string methods the templates call: strip() and
 * trim take ASCII whitespace off both ends. */
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "text/chat.h"

static const struct {
	const char *name;
	ChatFamily family;
} NAMES[] = {
	{ "llama2", CHAT_LLAMA2 },   { "chatml", CHAT_CHATML }, { "llama3", CHAT_LLAMA3 },
	{ "mistral", CHAT_MISTRAL }, { "zephyr", CHAT_ZEPHYR }, { "gemma", CHAT_GEMMA },
	{ "phi3", CHAT_PHI3 },
	/* other spellings, llama.cpp's among them */
	{ "llama-2", CHAT_LLAMA2 },  { "llama2-sys", CHAT_LLAMA2 }, { "llama-3", CHAT_LLAMA3 },
	{ "mistral-v1", CHAT_MISTRAL }, { "phi-3", CHAT_PHI3 },
};

/* ---- the common templates (Jinja), as model files carry them ---- */

static const char TEMPLATE_LLAMA2[] =
	"{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}"
	"{% set system_message = messages[0]['content'] %}{% else %}"
	"{% set loop_messages = messages %}{% set system_message = false %}{% endif %}"
	"{% for message in loop_messages %}"
	"{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
	"{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}"
	"{% endif %}"
	"{% if loop.index0 == 0 and system_message != false %}"
	"{% set content = '<<SYS>>\\n' + system_message + '\\n<</SYS>>\\n\\n' + message['content'] %}"
	"{% else %}{% set content = message['content'] %}{% endif %}"
	"{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}"
	"{% elif message['role'] == 'assistant' %}{{ ' '  + content.strip() + ' ' + eos_token }}"
	"{% endif %}{% endfor %}";

static const char TEMPLATE_CHATML[] =
	"{% for message in messages %}"
	"{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}"
	"{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

static const char TEMPLATE_LLAMA3[] =
	"{% set loop_messages = messages %}{% for message in loop_messages %}"
	"{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'"
	"+ message['content'] | trim + '<|eot_id|>' %}"
	"{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}"
	"{{ content }}{% endfor %}"
	"{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}";

static const char TEMPLATE_MISTRAL[] =
	"{%- if messages[0]['role'] == 'system' %}{%- set system_message = messages[0]['content'] %}"
	"{%- set loop_messages = messages[1:] %}{%- else %}{%- set loop_messages = messages %}"
	"{%- endif %}{{- bos_token }}{%- for message in loop_messages %}"
	"{%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
	"{{- raise_exception('After the optional system message, conversation roles must alternate "
	"user/assistant/user/assistant...') }}{%- endif %}"
	"{%- if message['role'] == 'user' %}"
	"{%- if loop.first and system_message is defined %}"
	"{{- ' [INST] ' + system_message + '\\n\\n' + message['content'] + ' [/INST]' }}"
	"{%- else %}{{- ' [INST] ' + message['content'] + ' [/INST]' }}{%- endif %}"
	"{%- elif message['role'] == 'assistant' %}{{- ' ' + message['content'] + eos_token}}"
	"{%- else %}{{- raise_exception('Only user and assistant roles are supported, with the "
	"exception of an initial optional system message!') }}{%- endif %}{%- endfor %}";

static const char TEMPLATE_ZEPHYR[] =
	"{% for message in messages %}\n"
	"{% if message['role'] == 'user' %}\n"
	"{{ '<|user|>\\n' + message['content'] + eos_token }}\n"
	"{% elif message['role'] == 'system' %}\n"
	"{{ '<|system|>\\n' + message['content'] + eos_token }}\n"
	"{% elif message['role'] == 'assistant' %}\n"
	"{{ '<|assistant|>\\n'  + message['content'] + eos_token }}\n"
	"{% endif %}\n"
	"{% if loop.last and add_generation_prompt %}\n"
	"{{ '<|assistant|>' }}\n"
	"{% endif %}\n"
	"{% endfor %}";

static const char TEMPLATE_GEMMA[] =
	"{{ bos_token }}{% if messages[0]['role'] == 'system' %}"
	"{{ raise_exception('System role not supported') }}{% endif %}"
	"{% for message in messages %}"
	"{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
	"{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}"
	"{% endif %}{% if (message['role'] == 'assistant') %}{% set role = 'model' %}"
	"{% else %}{% set role = message['role'] %}{% endif %}"
	"{{ '<start_of_turn>' + role + '\\n' + message['content'] | trim + '<end_of_turn>\\n' }}"
	"{% endfor %}{% if add_generation_prompt %}{{'<start_of_turn>model\\n'}}{% endif %}";

static const char TEMPLATE_PHI3[] =
	"{% for message in messages %}"
	"{% if message['role'] == 'system' %}{{'<|system|>\\n' + message['content'] + '<|end|>\\n'}}"
	"{% elif message['role'] == 'user' %}{{'<|user|>\\n' + message['content'] + '<|end|>\\n'}}"
	"{% elif message['role'] == 'assistant' %}{{'<|assistant|>\\n' + message['content'] + '<|end|>\\n'}}"
	"{% endif %}{% endfor %}"
	"{% if add_generation_prompt %}{{ '<|assistant|>\\n' }}{% else %}{{ eos_token }}{% endif %}";

static const char *const SPECIAL_CHATML[] = { "<|im_start|>", "<|im_end|>" };
static const char *const SPECIAL_LLAMA3[] = { "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>" };
static const char *const SPECIAL_GEMMA[] = { "<start_of_turn>", "<end_of_turn>" };
static const char *const SPECIAL_PHI3[] = { "<|system|>", "<|user|>", "<|assistant|>", "<|end|>",
					    "<|endoftext|>" };

ChatFamily chat_family_by_name(const char *name)
{
	for (size_t i = 0; i < sizeof(NAMES) / sizeof(*NAMES); i++)
		if (!strcmp(name, NAMES[i].name))
			return NAMES[i].family;
	return CHAT_NONE;
}

const char *chat_family_name(ChatFamily f)
{
	return f >= 0 && f < CHAT_FAMILIES ? NAMES[f].name : "none";
}

const char *chat_family_list(void)
{
	return "llama2, chatml, llama3, mistral, zephyr, gemma, phi3";
}

const char *chat_template_source(ChatFamily f)
{
	static const char *const src[CHAT_FAMILIES] = {
		[CHAT_LLAMA2] = TEMPLATE_LLAMA2, [CHAT_CHATML] = TEMPLATE_CHATML,
		[CHAT_LLAMA3] = TEMPLATE_LLAMA3, [CHAT_MISTRAL] = TEMPLATE_MISTRAL,
		[CHAT_ZEPHYR] = TEMPLATE_ZEPHYR, [CHAT_GEMMA] = TEMPLATE_GEMMA,
		[CHAT_PHI3] = TEMPLATE_PHI3,
	};

	return f >= 0 && f < CHAT_FAMILIES ? src[f] : NULL;
}

const char *const *chat_special_tokens(ChatFamily f, int *n)
{
#define LIST(a) (*n = (int)(sizeof(a) / sizeof(*a)), a)
	switch (f) {
	case CHAT_CHATML: return LIST(SPECIAL_CHATML);
	case CHAT_LLAMA3: return LIST(SPECIAL_LLAMA3);
	case CHAT_GEMMA: return LIST(SPECIAL_GEMMA);
	case CHAT_PHI3: return LIST(SPECIAL_PHI3);
	default: *n = 0; return NULL;
	}
#undef LIST
}

/* ---- detection: llama.cpp's markers, in its order, for these families ---- */

static int has(const char *t, size_t len, const char *needle)
{
	return memmem(t, len, needle, strlen(needle)) != NULL;
}

ChatFormat chat_detect(const char *t, size_t len)
{
	ChatFormat f = { CHAT_NONE, 0 };

	if (has(t, len, "<|im_start|>"))
		f.family = CHAT_CHATML;
	else if (has(t, len, "[INST]")) {
		if (has(t, len, "<<SYS>>"))
			f.family = CHAT_LLAMA2;
		else
			f = (ChatFormat){ CHAT_MISTRAL, !has(t, len, "' [INST] '") };
	} else if (has(t, len, "<|assistant|>") && has(t, len, "<|end|>"))
		f.family = CHAT_PHI3;
	else if (has(t, len, "<|user|>") && has(t, len, "<|assistant|>"))
		f = (ChatFormat){ CHAT_ZEPHYR, has(t, len, "<|endoftext|>") };
	else if (has(t, len, "<start_of_turn>"))
		f.family = CHAT_GEMMA;
	else if (has(t, len, "<|start_header_id|>") && has(t, len, "<|end_header_id|>"))
		f.family = CHAT_LLAMA3;
	return f;
}

/* ---- rendering ---- */

typedef struct {
	FILE *f;
	char *buf;
	size_t len;
	const char *bos, *eos;
	char *err;
	size_t errlen;
	int failed;
} Out;

static const char *const ROLE[] = { "system", "user", "assistant" };

static void put(Out *o, const char *s)
{
	fputs(s, o->f);
}

/* s with ASCII whitespace taken off both ends (Python's strip, Jinja's trim). */
static void put_stripped(Out *o, const char *s)
{
	size_t n;

	while (*s && isspace((unsigned char)*s))
		s++;
	n = strlen(s);
	while (n && isspace((unsigned char)s[n - 1]))
		n--;
	fwrite(s, 1, n, o->f);
}

static void refuse(Out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void refuse(Out *o, const char *fmt, ...)
{
	va_list ap;

	if (o->failed++)
		return;
	va_start(ap, fmt);
	vsnprintf(o->err, o->errlen, fmt, ap);
	va_end(ap);
}

/* The check the templates make: after an optional system message, user
 * and assistant take turns, starting with the user. */
static int in_turn(Out *o, const ChatMessage *m, int k, const char *why)
{
	if ((m->role == CHAT_ROLE_USER) != (k % 2 == 0)) {
		refuse(o, "%s", why);
		return 0;
	}
	return 1;
}

static const char ALTERNATE[] = "Conversation roles must alternate user/assistant/user/assistant/...";

static void render_llama2(Out *o, const ChatMessage *m, int n)
{
	const char *sys = n > 0 && m[0].role == CHAT_ROLE_SYSTEM ? m[0].content : NULL;
	int first = sys != NULL;

	for (int i = first; i < n; i++) {
		int k = i - first;
		char *content = NULL;
		size_t cap = 0;
		FILE *c;

		if (!in_turn(o, &m[i], k, ALTERNATE))
			return;
		if (m[i].role == CHAT_ROLE_SYSTEM)
			continue; /* neither branch: the template writes nothing */
		c = open_memstream(&content, &cap);
		if (!c) {
			refuse(o, "out of memory");
			return;
		}
		if (k == 0 && sys)
			fprintf(c, "<<SYS>>\n%s\n<</SYS>>\n\n", sys);
		fputs(m[i].content, c);
		fclose(c);
		if (m[i].role == CHAT_ROLE_USER) {
			put(o, o->bos);
			put(o, "[INST] ");
			put_stripped(o, content);
			put(o, " [/INST]");
		} else {
			put(o, " ");
			put_stripped(o, content);
			put(o, " ");
			put(o, o->eos);
		}
		free(content);
	}
}

static void render_chatml(Out *o, const ChatMessage *m, int n)
{
	for (int i = 0; i < n; i++)
		fprintf(o->f, "<|im_start|>%s\n%s<|im_end|>\n", ROLE[m[i].role], m[i].content);
	put(o, "<|im_start|>assistant\n");
}

static void render_llama3(Out *o, const ChatMessage *m, int n)
{
	for (int i = 0; i < n; i++) {
		if (i == 0)
			put(o, o->bos);
		fprintf(o->f, "<|start_header_id|>%s<|end_header_id|>\n\n", ROLE[m[i].role]);
		put_stripped(o, m[i].content);
		put(o, "<|eot_id|>");
	}
	put(o, "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

/* v1 takes a system message into the first user turn; v0.2 (variant 1)
 * has no system role (merge_system did it) and no spaces around turns. */
static void render_mistral(Out *o, const ChatMessage *m, int n, int v02)
{
	const char *sys = n > 0 && m[0].role == CHAT_ROLE_SYSTEM ? m[0].content : NULL;
	int first = sys != NULL;

	put(o, o->bos);
	for (int i = first; i < n; i++) {
		int k = i - first;

		if (!in_turn(o, &m[i], k, v02 ? ALTERNATE : "After the optional system message, "
			     "conversation roles must alternate user/assistant/user/assistant..."))
			return;
		if (m[i].role == CHAT_ROLE_USER && k == 0 && sys)
			fprintf(o->f, " [INST] %s\n\n%s [/INST]", sys, m[i].content);
		else if (m[i].role == CHAT_ROLE_USER)
			fprintf(o->f, "%s[INST] %s [/INST]", v02 ? "" : " ", m[i].content);
		else if (m[i].role == CHAT_ROLE_ASSISTANT)
			fprintf(o->f, "%s%s%s", v02 ? "" : " ", m[i].content, o->eos);
		else {
			refuse(o, "Only user and assistant roles are supported%s",
			       v02 ? "!" : ", with the exception of an initial optional system message!");
			return;
		}
	}
}

static void render_zephyr(Out *o, const ChatMessage *m, int n, int endoftext)
{
	for (int i = 0; i < n; i++)
		fprintf(o->f, "<|%s|>\n%s%s\n", ROLE[m[i].role], m[i].content,
			endoftext ? "<|endoftext|>" : o->eos);
	if (n > 0) /* the template writes it inside its loop, after the last message */
		put(o, "<|assistant|>\n");
}

static void render_gemma(Out *o, const ChatMessage *m, int n)
{
	put(o, o->bos);
	for (int i = 0; i < n; i++) {
		if (!in_turn(o, &m[i], i, ALTERNATE))
			return;
		fprintf(o->f, "<start_of_turn>%s\n",
			m[i].role == CHAT_ROLE_ASSISTANT ? "model" : ROLE[m[i].role]);
		put_stripped(o, m[i].content);
		put(o, "<end_of_turn>\n");
	}
	put(o, "<start_of_turn>model\n");
}

static void render_phi3(Out *o, const ChatMessage *m, int n)
{
	for (int i = 0; i < n; i++)
		fprintf(o->f, "<|%s|>\n%s<|end|>\n", ROLE[m[i].role], m[i].content);
	put(o, "<|assistant|>\n");
}

/* Whether the family's template uses a system message's content; where
 * not, llama-server merges it into the next message (or drops a lone one). */
static int takes_system(ChatFormat fmt)
{
	return !(fmt.family == CHAT_GEMMA || (fmt.family == CHAT_MISTRAL && fmt.variant));
}

/* m with a leading system message merged as llama-server does: its text,
 * "\n", the next message's text. *merged is the new text (or NULL). */
static int merge_system(const ChatMessage *m, int n, ChatMessage **out, char **merged)
{
	ChatMessage *c = malloc((size_t)(n ? n : 1) * sizeof(*c));
	int skip = n > 0 && m[0].role == CHAT_ROLE_SYSTEM;

	*merged = NULL;
	if (!c)
		return -1;
	memcpy(c, m + skip, (size_t)(n - skip) * sizeof(*c));
	if (skip && n > 1) {
		size_t a = strlen(m[0].content), b = strlen(m[1].content);

		*merged = malloc(a + b + 2);
		if (!*merged) {
			free(c);
			return -1;
		}
		memcpy(*merged, m[0].content, a);
		(*merged)[a] = '\n';
		memcpy(*merged + a + 1, m[1].content, b + 1);
		c[0].content = *merged;
	}
	*out = c;
	return n - skip;
}

static void render(Out *o, ChatFormat fmt, const ChatMessage *m, int n)
{
	switch (fmt.family) {
	case CHAT_LLAMA2: render_llama2(o, m, n); break;
	case CHAT_CHATML: render_chatml(o, m, n); break;
	case CHAT_LLAMA3: render_llama3(o, m, n); break;
	case CHAT_MISTRAL: render_mistral(o, m, n, fmt.variant); break;
	case CHAT_ZEPHYR: render_zephyr(o, m, n, fmt.variant); break;
	case CHAT_GEMMA: render_gemma(o, m, n); break;
	case CHAT_PHI3: render_phi3(o, m, n); break;
	default: refuse(o, "no chat template"); break;
	}
}

char *chat_render(ChatFormat fmt, const ChatMessage *m, int n, const char *bos, const char *eos,
		  char *err, size_t errlen)
{
	Out o = { .bos = bos, .eos = eos, .err = err, .errlen = errlen };
	ChatMessage *msgs = NULL;
	char *merged = NULL;
	size_t bl = strlen(bos);
	const char *prefill = NULL;

	if (n < 1)
		return snprintf(err, errlen, "'messages' must not be empty"), NULL;
	/* a trailing assistant message is continued, as llama-server does: the
	 * rest rendered up to the assistant's turn, then its text as it is */
	if (m[n - 1].role == CHAT_ROLE_ASSISTANT) {
		if (n >= 2 && m[n - 2].role == CHAT_ROLE_ASSISTANT)
			return snprintf(err, errlen, "Cannot have 2 or more assistant messages at the "
					"end of the list."), NULL;
		prefill = m[--n].content;
	}
	if (!takes_system(fmt)) {
		if ((n = merge_system(m, n, &msgs, &merged)) < 0)
			return snprintf(err, errlen, "out of memory"), NULL;
		m = msgs;
	}
	o.f = open_memstream(&o.buf, &o.len);
	if (!o.f)
		refuse(&o, "out of memory");
	else {
		render(&o, fmt, m, n);
		if (prefill)
			put(&o, prefill);
		if (fclose(o.f) != 0)
			refuse(&o, "out of memory");
	}
	free(msgs);
	free(merged);
	if (o.failed) {
		free(o.buf);
		return NULL;
	}
	/* the tokenizer adds BOS: a template's own leading BOS text goes */
	if (bl && !strncmp(o.buf, bos, bl))
		memmove(o.buf, o.buf + bl, o.len - bl + 1);
	return o.buf;
}

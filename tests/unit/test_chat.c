/* test_chat.c - chat templates: the family of a template's text, and the
 * prompt each family renders. The expected prompts are llama-server's
 * (its Jinja engine on the family's template, BOS dropped) for the same
 * conversation; t_chat_llamacpp checks them against a running llama-server. */
#include <stdlib.h>
#include <string.h>
#include "text/chat.h"
#include "check.h"

static const ChatMessage TALK[] = {
	{ CHAT_ROLE_SYSTEM, "S" },
	{ CHAT_ROLE_USER, "U" },
	{ CHAT_ROLE_ASSISTANT, " A " },
	{ CHAT_ROLE_USER, "V" },
};

static void expect_render(ChatFormat fmt, const char *want)
{
	char err[256] = "";
	char *got = chat_render(fmt, TALK, 4, "<s>", "</s>", err, sizeof(err));

	CHECK(got && !strcmp(got, want), "%s/%d: want\n%s\ngot\n%s (%s)", chat_family_name(fmt.family),
	      fmt.variant, want, got ? got : "NULL", err);
	free(got);
}

static void test_render(void)
{
	expect_render((ChatFormat){ CHAT_CHATML, 0 },
		      "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU<|im_end|>\n"
		      "<|im_start|>assistant\n A <|im_end|>\n<|im_start|>user\nV<|im_end|>\n"
		      "<|im_start|>assistant\n");
	/* the leading <s> is the tokenizer's BOS; the next turn's stays as text */
	expect_render((ChatFormat){ CHAT_LLAMA2, 0 },
		      "[INST] <<SYS>>\nS\n<</SYS>>\n\nU [/INST] A </s><s>[INST] V [/INST]");
	expect_render((ChatFormat){ CHAT_LLAMA3, 0 },
		      "<|start_header_id|>system<|end_header_id|>\n\nS<|eot_id|>"
		      "<|start_header_id|>user<|end_header_id|>\n\nU<|eot_id|>"
		      "<|start_header_id|>assistant<|end_header_id|>\n\nA<|eot_id|>"
		      "<|start_header_id|>user<|end_header_id|>\n\nV<|eot_id|>"
		      "<|start_header_id|>assistant<|end_header_id|>\n\n");
	expect_render((ChatFormat){ CHAT_MISTRAL, 0 }, " [INST] S\n\nU [/INST]  A </s> [INST] V [/INST]");
	/* v0.2 has no system role: llama-server merges it into the first turn */
	expect_render((ChatFormat){ CHAT_MISTRAL, 1 }, "[INST] S\nU [/INST] A </s>[INST] V [/INST]");
	expect_render((ChatFormat){ CHAT_ZEPHYR, 0 },
		      "<|system|>\nS</s>\n<|user|>\nU</s>\n<|assistant|>\n A </s>\n<|user|>\nV</s>\n<|assistant|>\n");
	expect_render((ChatFormat){ CHAT_ZEPHYR, 1 },
		      "<|system|>\nS<|endoftext|>\n<|user|>\nU<|endoftext|>\n<|assistant|>\n A <|endoftext|>\n"
		      "<|user|>\nV<|endoftext|>\n<|assistant|>\n");
	expect_render((ChatFormat){ CHAT_GEMMA, 0 },
		      "<start_of_turn>user\nS\nU<end_of_turn>\n<start_of_turn>model\nA<end_of_turn>\n"
		      "<start_of_turn>user\nV<end_of_turn>\n<start_of_turn>model\n");
	expect_render((ChatFormat){ CHAT_PHI3, 0 },
		      "<|system|>\nS<|end|>\n<|user|>\nU<|end|>\n<|assistant|>\n A <|end|>\n<|user|>\nV<|end|>\n"
		      "<|assistant|>\n");
}

static void expect_refused(ChatFormat fmt, const ChatMessage *m, int n, const char *why)
{
	char err[256] = "";
	char *got = chat_render(fmt, m, n, "<s>", "</s>", err, sizeof(err));

	CHECK(!got && strstr(err, why), "%s: want a refusal saying '%s', got '%s' (%s)",
	      chat_family_name(fmt.family), why, got ? got : "NULL", err);
	free(got);
}

static void test_refusals(void)
{
	ChatMessage two_users[] = { { CHAT_ROLE_USER, "a" }, { CHAT_ROLE_USER, "b" } };
	ChatMessage trailing[] = { { CHAT_ROLE_USER, "a" }, { CHAT_ROLE_ASSISTANT, "b" },
				   { CHAT_ROLE_ASSISTANT, "c" } };
	ChatMessage second_system[] = { { CHAT_ROLE_USER, "a" }, { CHAT_ROLE_SYSTEM, "c" } };
	char err[64];

	expect_refused((ChatFormat){ CHAT_LLAMA2, 0 }, two_users, 2, "alternate");
	expect_refused((ChatFormat){ CHAT_GEMMA, 0 }, two_users, 2, "alternate");
	expect_refused((ChatFormat){ CHAT_MISTRAL, 0 }, two_users, 2, "alternate");
	expect_refused((ChatFormat){ CHAT_MISTRAL, 0 }, second_system, 2, "Only user and assistant");
	expect_refused((ChatFormat){ CHAT_CHATML, 0 }, trailing, 3, "2 or more assistant");
	/* one trailing assistant message is continued (llama-server's prefill) */
	char *pre = chat_render((ChatFormat){ CHAT_CHATML, 0 }, trailing, 2, "<s>", "</s>", err, sizeof(err));
	CHECK(pre && !strcmp(pre, "<|im_start|>user\na<|im_end|>\n<|im_start|>assistant\nb"),
	      "chatml prefill: %s", pre ? pre : err);
	free(pre);
	CHECK(!chat_render((ChatFormat){ CHAT_CHATML, 0 }, two_users, 0, "<s>", "</s>", err, sizeof(err)),
	      "no messages rendered");
	/* chatml takes any order, as its template does: both turns, then the reply's */
	char *both = chat_render((ChatFormat){ CHAT_CHATML, 0 }, two_users, 2, "<s>", "</s>", err, sizeof(err));
	CHECK(both && !strcmp(both, "<|im_start|>user\na<|im_end|>\n<|im_start|>user\nb<|im_end|>\n"
				    "<|im_start|>assistant\n"),
	      "chatml, two user turns: %s", both ? both : err);
	free(both);
}

static void expect_detect(const char *tmpl, ChatFamily family, int variant)
{
	ChatFormat f = chat_detect(tmpl, strlen(tmpl));

	CHECK(f.family == family && f.variant == variant, "detect %.60s...: want %s/%d, got %s/%d", tmpl,
	      chat_family_name(family), variant, chat_family_name(f.family), f.variant);
}

static void test_detect(void)
{
	for (int f = 0; f < CHAT_FAMILIES; f++) {
		int n;

		expect_detect(chat_template_source(f), f, 0);
		CHECK(chat_family_by_name(chat_family_name(f)) == f, "name of %d", f);
		chat_special_tokens(f, &n);
		CHECK(n >= 0 && n <= 5, "special tokens of %s: %d", chat_family_name(f), n);
	}
	/* Mistral-7B-Instruct-v0.2's own: no space before [INST], no system */
	expect_detect("{{ bos_token }}{% for message in messages %}{% if message['role'] == 'user' %}"
		      "{{ '[INST] ' + message['content'] + ' [/INST]' }}{% elif message['role'] == "
		      "'assistant' %}{{ message['content'] + eos_token}}{% endif %}{% endfor %}",
		      CHAT_MISTRAL, 1);
	/* StableLM's zephyr ends turns with <|endoftext|> */
	expect_detect("{% for message in messages %}\n{% if message['role'] == 'user' %}\n"
		      "{{ '<|user|>\n' + message['content'] + '<|endoftext|>' }}\n{% elif message['role'] == "
		      "'assistant' %}\n{{ '<|assistant|>\n' + message['content'] + '<|endoftext|>' }}\n"
		      "{% endif %}\n{% endfor %}", CHAT_ZEPHYR, 1);
	expect_detect("{% for m in messages %}{{ m['content'] }}{% endfor %}", CHAT_NONE, 0);
	expect_detect("", CHAT_NONE, 0);
	CHECK(chat_family_by_name("llama-3") == CHAT_LLAMA3 && chat_family_by_name("phi-3") == CHAT_PHI3,
	      "llama.cpp's spellings");
	CHECK(chat_family_by_name("jinja") == CHAT_NONE, "an unknown name");
}

int main(void)
{
	test_render();
	test_refusals();
	test_detect();
	printf("%s\n", failures ? "chat: FAILED" : "chat: ok");
	return check_report();
}

/* chat.h - chat prompts from the model's own template.
 *
 * A GGUF file's tokenizer.chat_template is a Jinja program. The engine does
 * not run Jinja: it recognizes the template's family, as llama.cpp's
 * llm_chat_detect_template does, and renders the family's prompt in C, to
 * the byte that llama-server's Jinja engine renders the family's common
 * template: system messages it cannot take merged into the first user
 * message with "\n", a leading BOS text dropped (the tokenizer adds BOS).
 * The text keeps its special tokens as text; tokenizer_encode_special turns
 * them into their ids from the vocabulary. */
#ifndef INFER_CHAT_H
#define INFER_CHAT_H

#include <stddef.h>

typedef enum {
	CHAT_NONE = -1,
	CHAT_LLAMA2,   /* Meta's Llama-2-chat: [INST] <<SYS>> */
	CHAT_CHATML,   /* <|im_start|>role ... <|im_end|> */
	CHAT_LLAMA3,   /* <|start_header_id|>role<|end_header_id|> ... <|eot_id|> */
	CHAT_MISTRAL,  /* Mistral's v1: " [INST] ... [/INST]" */
	CHAT_ZEPHYR,   /* <|user|>\n ... </s> */
	CHAT_GEMMA,    /* <start_of_turn>user ... <end_of_turn> */
	CHAT_PHI3,     /* <|user|>\n ... <|end|> */
	CHAT_FAMILIES
} ChatFamily;

/* A family and the variant of its template that changes the text. */
typedef struct {
	ChatFamily family;
	int variant;   /* mistral: 1 the v0.2 form ("[INST] " without the space before
			* it, no system role); zephyr: 1 "<|endoftext|>" ends turns */
} ChatFormat;

typedef enum { CHAT_ROLE_SYSTEM, CHAT_ROLE_USER, CHAT_ROLE_ASSISTANT } ChatRole;

typedef struct {
	ChatRole role;
	const char *content;
} ChatMessage;

/* The family named name ("chatml", "llama2", ... as chat_family_list gives,
 * and llama.cpp's spellings "llama3", "phi3", "mistral-v1"), or CHAT_NONE. */
ChatFamily chat_family_by_name(const char *name);
const char *chat_family_name(ChatFamily f);
/* "llama2, chatml, llama3, mistral, zephyr, gemma, phi3" */
const char *chat_family_list(void);

/* The format of a template's text (len bytes), or family CHAT_NONE. */
ChatFormat chat_detect(const char *tmpl, size_t len);

/* The family's common template (what mkmodel --chat-template writes) and
 * the special tokens it names beyond BOS and EOS, which the vocabulary must
 * hold as control tokens for the prompt to carry them as single ids. */
const char *chat_template_source(ChatFamily f);
const char *const *chat_special_tokens(ChatFamily f, int *n);

/* The prompt for n messages (bos and eos: the vocabulary's texts), with the
 * generation prompt; malloc'd. NULL on a conversation the template refuses
 * (roles out of turn, a trailing assistant message), with err saying why. */
char *chat_render(ChatFormat fmt, const ChatMessage *m, int n, const char *bos, const char *eos,
		  char *err, size_t errlen);

#endif

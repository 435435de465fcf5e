#!/usr/bin/env python3
"""chat_compare.py OURS_URL LLAMA_URL: our engine's chat prompt against
llama-server's, conversation by conversation.

For each conversation: /apply-template's text from both servers must be
equal; llama-server's text tokenized by llama.cpp (/tokenize, add_special
and parse_special, as its chat completions tokenize) must equal our
tokenization of our text; and our /v1/chat/completions must count exactly
that many prompt tokens. A conversation that llama-server's template
refuses must be refused by ours too (400). A trailing assistant message is
continued (llama-server's prefill). Prints one line per
conversation and exits 1 on the first difference."""
import json
import sys
import urllib.error
import urllib.request

CONVERSATIONS = [
    [{"role": "user", "content": "Hello"}],
    [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hello there"}],
    [{"role": "system", "content": "You are a helpful assistant."},
     {"role": "user", "content": "What is 2+2?"},
     {"role": "assistant", "content": "4"},
     {"role": "user", "content": "And 3+3?"}],
    [{"role": "user", "content": "  padded, with spaces \n"},
     {"role": "assistant", "content": "\n reply \t"},
     {"role": "user", "content": "next"}],
    [{"role": "user", "content": "line one\nline two\n\nline four"}],
    [{"role": "user", "content": "h\u00e9llo w\u00f6rld \U0001F642 \u4f60\u597d"}],
    [{"role": "developer", "content": "Answer in French."},
     {"role": "user", "content": "Good morning"}],
    [{"role": "user", "content": [{"type": "text", "text": "part one"},
                                  {"type": "text", "text": "part two"}]}],
    [{"role": "user", "content": "a literal <s> and </s> inside"}],
    [{"role": "system", "content": "Only a system message"}],
    [{"role": "user", "content": "x"}, {"role": "user", "content": "two users"}],
    # a trailing assistant message: continued (prefill), as llama-server does
    [{"role": "user", "content": "Tell me a story"}, {"role": "assistant", "content": "Once upon"}],
    [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"},
     {"role": "assistant", "content": " Sure, here is "}],
    [{"role": "user", "content": "x"}, {"role": "assistant", "content": "a"},
     {"role": "assistant", "content": "b"}],
]


MANGLED = "</s>|assistant|>"


def post(base, path, body):
    req = urllib.request.Request(base + path, data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")


def main():
    ours, llama = sys.argv[1], sys.argv[2]
    compared = 0
    for i, msgs in enumerate(CONVERSATIONS):
        ls, lt = post(llama, "/apply-template", {"messages": msgs})
        os_, ot = post(ours, "/apply-template", {"messages": msgs})
        if ls != 200:
            if os_ != 400:
                sys.exit(f"conversation {i}: llama-server refuses it ({ls}: {lt}), "
                         f"ours answers {os_}: {ot}")
            print(f"conversation {i}: both refuse: {ot['error']['message']}")
            continue
        if os_ != 200:
            sys.exit(f"conversation {i}: ours refuses ({os_}: {ot}), llama-server renders "
                     f"{lt['prompt']!r}")
        lp, note = lt["prompt"], ""
        if msgs[-1]["role"] == "assistant" and MANGLED in lp:
            # llama-server's prefill takes the assistant's header as the text
            # after the longest prefix shared with the prompt rendered without
            # it; phi3's template then ends in </s>, so the header loses its
            # "<". That defect is not copied: the header is compared whole.
            lp = lp.replace(MANGLED, "<|assistant|>", 1)
            note = " (llama-server's prefill drops the '<' of phi3's <|assistant|>: compared whole)"
        if ot["prompt"] != lp:
            sys.exit(f"conversation {i}: prompts differ\n ours:  {ot['prompt']!r}\n"
                     f" llama: {lt['prompt']!r}")
        tok = {"content": lp, "add_special": True, "parse_special": True}
        _, lids = post(llama, "/tokenize", tok)
        _, oids = post(ours, "/tokenize", dict(tok, content=ot["prompt"]))
        if lids["tokens"] != oids["tokens"]:
            sys.exit(f"conversation {i}: tokens differ\n ours:  {oids['tokens']}\n"
                     f" llama: {lids['tokens']}")
        st, res = post(ours, "/v1/chat/completions",
                       {"messages": msgs, "max_tokens": 1, "temperature": 0})
        if st != 200 or res["usage"]["prompt_tokens"] != len(lids["tokens"]):
            sys.exit(f"conversation {i}: our chat completion ran {st} "
                     f"{res.get('usage', res)}, want {len(lids['tokens'])} prompt tokens")
        compared += 1
        print(f"conversation {i}: equal, {len(lids['tokens'])} tokens: {lp!r}{note}")
    if compared < len(CONVERSATIONS) // 2:
        sys.exit(f"only {compared} conversations rendered: too few to compare")
    print(f"{compared} conversations equal, token for token")


if __name__ == "__main__":
    main()

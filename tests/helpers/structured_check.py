#!/usr/bin/env python3
"""structured_check.py SPEC RESULTS: structured replies against their schemas.

SPEC is client.js's spec; each request carries its schema in
response_format (json_schema), or asks for json_object. RESULTS is
client.js's output, one JSON result per line, in the spec's order. Every
reply must end with finish_reason "stop" and be JSON that python3-jsonschema
(Draft 7, the validator nobody here wrote) finds valid against its schema, or
for json_object a JSON object; a streamed reply must equal the same request
answered whole. Prints one line per request; exits 1 at the first failure."""
import json
import sys

import jsonschema


def key(req):
    return json.dumps({k: v for k, v in req.items() if k != "stream"}, sort_keys=True)


def main():
    spec = json.load(open(sys.argv[1]))
    results = [json.loads(l) for l in open(sys.argv[2])]
    if len(results) != len(spec["requests"]):
        sys.exit(f"{len(results)} results for {len(spec['requests'])} requests")
    whole = {}
    for req, res in zip(spec["requests"], results):
        if "error" in res or res.get("finish_reason") != "stop":
            sys.exit(f"request {res.get('index')}: {res.get('error') or res.get('finish_reason')}: "
                     f"{res.get('text')!r}")
        value = json.loads(res["text"])
        fmt = req["response_format"]
        if fmt["type"] == "json_schema":
            jsonschema.Draft7Validator(fmt["json_schema"]["schema"]).validate(value)
        elif not isinstance(value, dict):
            sys.exit(f"request {res['index']}: json_object gave {type(value).__name__}")
        k = key(req)
        if req.get("stream"):
            if whole.get(k) != res["text"]:
                sys.exit(f"request {res['index']}: streamed {res['text']!r}, whole {whole.get(k)!r}")
        else:
            whole[k] = res["text"]
        api = "chat" if "messages" in req else "completions"
        print(f"{res['index']}: {api} t={req.get('temperature')} seed={req.get('seed')} "
              f"{'stream' if req.get('stream') else 'whole'}: valid: {res['text']}")
    print(f"{len(results)} replies valid against their schemas")


if __name__ == "__main__":
    main()

/* llama_cli.h - llama-server's command line in infer's spelling, so that
 * `infer -m FILE --host H --port P -c N -np N -t N` starts the HTTP engine
 * as `llama-server` with the same words would (issue 58).
 *
 * A command line is llama-server's when it names its model with -m or
 * --model. Its options are then llama-server's: -t is threads (infer's -t
 * is a temperature), -b the batch size (infer's is the backend, spelled
 * --backend here), -c the context. Each maps onto one of infer's options,
 * or is accepted with a note saying what it means here (--jinja, -cb,
 * -ngl); the rest of infer's long options pass as they are, and anything
 * else is refused by the parser, never ignored. */
#ifndef INFER_LLAMA_CLI_H
#define INFER_LLAMA_CLI_H

#include <stddef.h>
#include <stdio.h>

/* Whether argv is llama-server's: it has -m or --model. */
int llama_cli_wanted(int argc, char *const *argv);

/* *out (malloc'd, *outc entries and a NULL; its strings are argv's or
 * static) is argv in infer's spelling, with --http HOST:PORT (llama-server's
 * defaults 127.0.0.1 and 8080). Notes on accepted options go to notes.
 * -1 with err (errlen bytes) on a missing value or no memory. */
int llama_cli_translate(int argc, char *const *argv, FILE *notes, char ***out, int *outc,
			char *err, size_t errlen);

#endif

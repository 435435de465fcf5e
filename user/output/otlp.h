/* otlp.h - OTLP/HTTP JSON transport: a bounded queue of export requests and
 * one sender thread that POSTs them with libcurl to ENDPOINT/v1/<signal>.
 *
 * Retries follow the OTLP/HTTP specification: 429, 502, 503 and 504 (and a
 * connection that fails) are retried with exponential backoff and jitter,
 * or after the server's Retry-After; any other status is final. A request
 * that cannot be queued (the queue is full), that is refused, or whose
 * retries run out is dropped and its items are counted: nothing is lost
 * without a count. */
#ifndef SPANTRACE_OTLP_H
#define SPANTRACE_OTLP_H

#include <stddef.h>
#include <stdint.h>

#define OTLP_QUEUE_MAX 64        /* export requests waiting to be sent */
#define OTLP_MAX_ATTEMPTS 6      /* the first try and five retries */

struct otlp_stats {
	uint64_t requests;           /* export requests accepted (2xx) */
	uint64_t retries;            /* POSTs repeated after a retryable failure */
	uint64_t items_sent;         /* spans or data points in accepted requests */
	uint64_t items_rejected;     /* the server's partialSuccess rejections */
	uint64_t dropped_queue_full; /* items dropped: the queue was full */
	uint64_t dropped_failed;     /* items dropped: final status, or retries ran out */
	uint64_t dropped_shutdown;   /* items still queued when the flush time ran out */
	int last_status;             /* the last HTTP status (0: none, -1: no connection) */
	char last_error[256];        /* the last failure: the URL and curl's words, or its status */
};

struct otlp_exporter;

/* Checks that endpoint is an http:// or https:// URL and starts the sender.
 * signal: "traces" or "metrics". NULL with a message in err. */
struct otlp_exporter *otlp_open(const char *endpoint, const char *signal, char *err, size_t errlen);

/* Queues one ExportXServiceRequest body (JSON) of nitems items; takes body
 * (free()d here in every case). 0, or -1 if it was dropped (counted). */
int otlp_enqueue(struct otlp_exporter *x, char *body, uint64_t nitems);

/* A copy of the counters so far. */
void otlp_stats_get(struct otlp_exporter *x, struct otlp_stats *out);

/* Sends what is queued for at most flush_s seconds, stops the sender and
 * frees everything; *out (if not NULL) gets the final counters. */
void otlp_close(struct otlp_exporter *x, double flush_s, struct otlp_stats *out);

/* Building export requests with json-c, every allocation checked: these add
 * v under key to object o, or append it to array a. If o/a or v is NULL, or
 * the add fails, v is freed and *failed set: the builder then drops what it
 * was building, and counts it, rather than send it half-built. */
struct json_object;
void otlp_json_add(int *failed, struct json_object *o, const char *key, struct json_object *v);
void otlp_json_push(int *failed, struct json_object *a, struct json_object *v);

/* "N sent in M requests, R retries, D dropped (...)" for status lines. */
void otlp_stats_text(const struct otlp_stats *s, const char *what, char *buf, size_t len);

#endif

/* otlp.c - OTLP/HTTP JSON transport (see otlp.h). */
#include "output/otlp.h"

#include <curl/curl.h>
#include <json-c/json.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "core/numparse.h"

#define BACKOFF_FIRST_MS 100
#define BACKOFF_MAX_MS 5000
#define RETRY_AFTER_MAX_S 30
#define POST_TIMEOUT_S 10

struct otlp_request {
	char *body;
	uint64_t nitems;
};

struct otlp_exporter {
	char *url;
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct otlp_request queue[OTLP_QUEUE_MAX];
	size_t head, count;
	int stopping;
	struct timespec deadline;  /* while stopping: give up after it */
	struct otlp_stats st;
	CURL *curl;
};

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static void curl_init_once(void) { curl_global_init(CURL_GLOBAL_DEFAULT); }

/* ---- one POST ---- */

struct response {
	char buf[4096];
	size_t len;
	long retry_after_s;        /* -1: none */
	char error[CURL_ERROR_SIZE]; /* curl's words when no status came back */
};

static size_t on_body(char *p, size_t size, size_t n, void *ctx)
{
	struct response *r = ctx;
	size_t len = size * n, room = sizeof(r->buf) - 1 - r->len;

	memcpy(r->buf + r->len, p, len < room ? len : room);
	r->len += len < room ? len : room;
	r->buf[r->len] = 0;
	return len;
}

/* Retry-After in seconds (the HTTP-date form is not used by OTLP servers). */
static size_t on_header(char *p, size_t size, size_t n, void *ctx)
{
	struct response *r = ctx;
	size_t len = size * n;
	char val[32];
	uint64_t v;

	if (len > 12 && !strncasecmp(p, "Retry-After:", 12)) {
		size_t vl = len - 12 < sizeof(val) - 1 ? len - 12 : sizeof(val) - 1;
		memcpy(val, p + 12, vl);
		val[vl] = 0;
		char *s = val + strspn(val, " \t");
		s[strcspn(s, " \t\r\n")] = 0;
		if (!parse_uint(s, 0, RETRY_AFTER_MAX_S, &v))
			r->retry_after_s = (long)v;
	}
	return len;
}

/* partialSuccess.rejectedSpans / rejectedDataPoints of a 2xx body. */
static uint64_t rejected_items(const char *body)
{
	json_object *j = json_tokener_parse(body), *ps, *v;
	uint64_t n = 0;

	if (j && json_object_object_get_ex(j, "partialSuccess", &ps) &&
	    (json_object_object_get_ex(ps, "rejectedSpans", &v) ||
	     json_object_object_get_ex(ps, "rejectedDataPoints", &v)))
		n = (uint64_t)json_object_get_int64(v);
	json_object_put(j);
	return n;
}

/* The HTTP status, or -1 when no response came. */
static long post(struct otlp_exporter *x, const char *body, struct response *resp)
{
	struct curl_slist *hdr = curl_slist_append(NULL, "Content-Type: application/json");
	long status = -1;

	resp->len = 0;
	resp->buf[0] = 0;
	resp->retry_after_s = -1;
	resp->error[0] = 0;
	curl_easy_reset(x->curl);
	curl_easy_setopt(x->curl, CURLOPT_ERRORBUFFER, resp->error);
	curl_easy_setopt(x->curl, CURLOPT_URL, x->url);
	curl_easy_setopt(x->curl, CURLOPT_HTTPHEADER, hdr);
	curl_easy_setopt(x->curl, CURLOPT_POSTFIELDS, body);
	curl_easy_setopt(x->curl, CURLOPT_TIMEOUT, (long)POST_TIMEOUT_S);
	curl_easy_setopt(x->curl, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(x->curl, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(x->curl, CURLOPT_WRITEDATA, resp);
	curl_easy_setopt(x->curl, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(x->curl, CURLOPT_HEADERDATA, resp);
	CURLcode rc = hdr ? curl_easy_perform(x->curl) : CURLE_OUT_OF_MEMORY;
	if (rc == CURLE_OK)
		curl_easy_getinfo(x->curl, CURLINFO_RESPONSE_CODE, &status);
	else if (!resp->error[0])
		snprintf(resp->error, sizeof(resp->error), "%s", curl_easy_strerror(rc));
	curl_slist_free_all(hdr);
	return status;
}

static int retryable(long status)
{
	return status == -1 || status == 429 || status == 502 || status == 503 || status == 504;
}

/* ---- the sender thread ---- */

/* Sleeps ms unless the flush deadline comes first; 0 if the wait ended early. */
static int backoff_wait(struct otlp_exporter *x, long ms)
{
	struct timespec until;
	int rc = 1;

	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += ms / 1000;
	until.tv_nsec += (ms % 1000) * 1000000L;
	if (until.tv_nsec >= 1000000000L) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&x->lock);
	for (;;) {
		if (x->stopping && (until.tv_sec > x->deadline.tv_sec ||
				    (until.tv_sec == x->deadline.tv_sec && until.tv_nsec > x->deadline.tv_nsec))) {
			rc = 0;   /* the flush time ends before the backoff does */
			break;
		}
		if (pthread_cond_timedwait(&x->cond, &x->lock, &until))
			break;    /* timed out: the backoff is over */
	}
	pthread_mutex_unlock(&x->lock);
	return rc;
}

/* The last failure in words, with the URL (under x->lock): "connection
 * refused" says more than a status of -1. */
static void note_error(struct otlp_exporter *x, long status, const struct response *r)
{
	if (status == -1)
		snprintf(x->st.last_error, sizeof(x->st.last_error), "%s: %s", x->url, r->error);
	else if (status < 200 || status >= 300)
		snprintf(x->st.last_error, sizeof(x->st.last_error), "%s: HTTP %ld", x->url, status);
}

/* Sends one request with retries; updates the counters. */
static void send_request(struct otlp_exporter *x, struct otlp_request *rq)
{
	struct response resp;
	long status = -1, delay = BACKOFF_FIRST_MS;
	int attempt;

	for (attempt = 1; attempt <= OTLP_MAX_ATTEMPTS; attempt++) {
		status = post(x, rq->body, &resp);
		if (!retryable(status) || attempt == OTLP_MAX_ATTEMPTS)
			break;
		long wait = resp.retry_after_s >= 0 ? resp.retry_after_s * 1000
						    : delay / 2 + rand() % (delay / 2 + 1);  /* jitter */
		delay = delay * 2 < BACKOFF_MAX_MS ? delay * 2 : BACKOFF_MAX_MS;
		pthread_mutex_lock(&x->lock);
		x->st.retries++;
		x->st.last_status = (int)status;
		note_error(x, status, &resp);
		pthread_mutex_unlock(&x->lock);
		if (!backoff_wait(x, wait))
			break;
	}
	uint64_t rejected = status >= 200 && status < 300 ? rejected_items(resp.buf) : 0;
	pthread_mutex_lock(&x->lock);
	x->st.last_status = (int)status;
	note_error(x, status, &resp);
	if (status >= 200 && status < 300) {
		x->st.requests++;
		x->st.items_rejected += rejected < rq->nitems ? rejected : rq->nitems;
		x->st.items_sent += rq->nitems - (rejected < rq->nitems ? rejected : rq->nitems);
	} else {
		x->st.dropped_failed += rq->nitems;
	}
	pthread_mutex_unlock(&x->lock);
}

static int past_deadline(const struct otlp_exporter *x)
{
	struct timespec now;

	clock_gettime(CLOCK_REALTIME, &now);
	return now.tv_sec > x->deadline.tv_sec ||
	       (now.tv_sec == x->deadline.tv_sec && now.tv_nsec >= x->deadline.tv_nsec);
}

static void *sender(void *arg)
{
	struct otlp_exporter *x = arg;
	struct otlp_request rq;

	pthread_mutex_lock(&x->lock);
	for (;;) {
		while (!x->count && !x->stopping)
			pthread_cond_wait(&x->cond, &x->lock);
		if (!x->count || (x->stopping && past_deadline(x)))
			break;
		rq = x->queue[x->head];
		x->head = (x->head + 1) % OTLP_QUEUE_MAX;
		x->count--;
		pthread_mutex_unlock(&x->lock);
		send_request(x, &rq);
		free(rq.body);
		pthread_mutex_lock(&x->lock);
	}
	pthread_mutex_unlock(&x->lock);
	return NULL;
}

/* ---- the interface ---- */

static char *signal_url(const char *endpoint, const char *signal)
{
	size_t n = strlen(endpoint);
	char *url;

	while (n && endpoint[n - 1] == '/')
		n--;
	if (asprintf(&url, "%.*s/v1/%s", (int)n, endpoint, signal) < 0)
		return NULL;
	return url;
}

struct otlp_exporter *otlp_open(const char *endpoint, const char *signal, char *err, size_t errlen)
{
	struct otlp_exporter *x;

	if (strncmp(endpoint, "http://", 7) && strncmp(endpoint, "https://", 8)) {
		snprintf(err, errlen, "OTLP endpoint '%s' is not an http:// or https:// URL", endpoint);
		return NULL;
	}
	pthread_once(&curl_once, curl_init_once);
	if (!(x = calloc(1, sizeof(*x))) || !(x->url = signal_url(endpoint, signal)) ||
	    !(x->curl = curl_easy_init())) {
		snprintf(err, errlen, "out of memory starting the OTLP exporter");
		goto fail;
	}
	pthread_mutex_init(&x->lock, NULL);
	pthread_cond_init(&x->cond, NULL);
	if (pthread_create(&x->thread, NULL, sender, x)) {
		snprintf(err, errlen, "cannot start the OTLP sender thread");
		pthread_mutex_destroy(&x->lock);
		pthread_cond_destroy(&x->cond);
		goto fail;
	}
	return x;
fail:
	if (x) {
		if (x->curl)
			curl_easy_cleanup(x->curl);
		free(x->url);
		free(x);
	}
	return NULL;
}

int otlp_enqueue(struct otlp_exporter *x, char *body, uint64_t nitems)
{
	int rc = 0;

	pthread_mutex_lock(&x->lock);
	if (!body || x->count == OTLP_QUEUE_MAX || x->stopping) {
		x->st.dropped_queue_full += nitems;
		free(body);
		rc = -1;
	} else {
		x->queue[(x->head + x->count) % OTLP_QUEUE_MAX] = (struct otlp_request){ body, nitems };
		x->count++;
		pthread_cond_broadcast(&x->cond);
	}
	pthread_mutex_unlock(&x->lock);
	return rc;
}

void otlp_stats_get(struct otlp_exporter *x, struct otlp_stats *out)
{
	pthread_mutex_lock(&x->lock);
	*out = x->st;
	pthread_mutex_unlock(&x->lock);
}

void otlp_close(struct otlp_exporter *x, double flush_s, struct otlp_stats *out)
{
	if (!x)
		return;
	pthread_mutex_lock(&x->lock);
	clock_gettime(CLOCK_REALTIME, &x->deadline);
	x->deadline.tv_sec += (time_t)flush_s;
	x->stopping = 1;
	pthread_cond_broadcast(&x->cond);
	pthread_mutex_unlock(&x->lock);
	pthread_join(x->thread, NULL);
	for (; x->count; x->count--, x->head = (x->head + 1) % OTLP_QUEUE_MAX) {
		x->st.dropped_shutdown += x->queue[x->head].nitems;
		free(x->queue[x->head].body);
	}
	if (out)
		*out = x->st;
	curl_easy_cleanup(x->curl);
	pthread_mutex_destroy(&x->lock);
	pthread_cond_destroy(&x->cond);
	free(x->url);
	free(x);
}

void otlp_stats_text(const struct otlp_stats *s, const char *what, char *buf, size_t len)
{
	snprintf(buf, len,
		 "otlp: %llu %s sent in %llu requests, %llu retries, %llu rejected, dropped %llu "
		 "(queue full %llu, failed %llu, at exit %llu), last status %d",
		 (unsigned long long)s->items_sent, what, (unsigned long long)s->requests,
		 (unsigned long long)s->retries, (unsigned long long)s->items_rejected,
		 (unsigned long long)(s->dropped_queue_full + s->dropped_failed + s->dropped_shutdown),
		 (unsigned long long)s->dropped_queue_full, (unsigned long long)s->dropped_failed,
		 (unsigned long long)s->dropped_shutdown, s->last_status);
	if (s->last_error[0] && (s->last_status < 200 || s->last_status >= 300))
		snprintf(buf + strlen(buf), len - strlen(buf), " (%s)", s->last_error);
}

void otlp_json_add(int *failed, json_object *o, const char *key, json_object *v)
{
	if (!o || !v || json_object_object_add(o, key, v)) {
		json_object_put(v);
		*failed = 1;
	}
}

void otlp_json_push(int *failed, json_object *a, json_object *v)
{
	if (!a || !v || json_object_array_add(a, v)) {
		json_object_put(v);
		*failed = 1;
	}
}

/* `l7run --metrics-listen ADDR:PORT`: the Prometheus text of metrics.c over HTTP, for a
 * Prometheus server to scrape (GET /metrics), and Kubernetes' liveness and readiness probes
 * (GET /healthz, /readyz). A thread of its own with blocking sockets, so
 * that a slow scraper never delays the data plane's event loop; it only reads maps. */
#define _GNU_SOURCE   /* accept4 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>
#include "telemetry.h"

static void answer(struct metrics_http *H, int c)
{
	char req[4096];
	size_t n = 0;
	struct timeval tv = { 2, 0 };   /* a scraper that sends nothing is dropped */
	setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
	setsockopt(c, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
	while (n < sizeof req - 1) {
		ssize_t r = recv(c, req + n, sizeof req - 1 - n, 0);
		if (r <= 0)
			return;
		n += (size_t)r;
		req[n] = 0;
		if (strstr(req, "\r\n\r\n") || strstr(req, "\n\n"))
			break;
	}
	char *body = NULL, why[256];
	const char *text = NULL;   /* a probe's answer, else body */
	size_t len = 0;
	const char *status = "200 OK", *type = "text/plain; version=0.0.4; charset=utf-8";
	int get = !strncmp(req, "GET ", 4), head = !strncmp(req, "HEAD ", 5);
	const char *target = req + (get ? 4 : 5);
	int probe = !strncmp(target, "/healthz ", 9) ? 0 : !strncmp(target, "/readyz ", 8) ? 1 : -1;
	if (!get && !head) {
		status = "405 Method Not Allowed";
	} else if (probe >= 0) {
		/* liveness: the event loop turns; readiness: a policy serves and l7run is not stopping */
		type = "text/plain; charset=utf-8";
		snprintf(why, sizeof why, "ok");
		if (H->health && H->health(H->arg, probe, why, sizeof why))
			status = "503 Service Unavailable";
		size_t w = strlen(why);
		if (w + 1 < sizeof why)
			why[w++] = '\n';
		text = why;
		len = w;
	} else if (strncmp(target, "/metrics ", 9) && strncmp(target, "/metrics? ", 10) && strncmp(target, "/metrics?", 9)) {
		status = "404 Not Found";
	} else {
		FILE *m = open_memstream(&body, &len);
		if (!m || H->write(H->arg, m) != 0)
			status = "503 Service Unavailable";
		if (m)
			fclose(m);
	}
	if (status[0] != '2' && probe < 0)
		len = 0;
	char hdr[256];
	int h = snprintf(hdr, sizeof hdr, "HTTP/1.1 %s\r\nContent-Type: %s\r\n"
			 "Content-Length: %zu\r\nConnection: close\r\n\r\n", status, type, len);
	if (send(c, hdr, (size_t)h, MSG_NOSIGNAL) == h && get && len)
		send(c, text ? text : body, len, MSG_NOSIGNAL);
	free(body);
}

static void *serve(void *arg)
{
	struct metrics_http *H = arg;

	for (;;) {
		int c = accept4(H->fd, NULL, NULL, SOCK_CLOEXEC);
		if (c < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			return NULL;   /* metrics_http_stop shut the listener down */
		}
		answer(H, c);
		close(c);
	}
}

int metrics_http_start(struct metrics_http *H, const char *addr, metrics_writer write, health_check health, void *arg)
{
	struct sockaddr_in a;
	int one = 1;

	if (parse_addr(addr, &a)) {
		fprintf(stderr, "l7run: bad --metrics-listen %s (expected A.B.C.D:PORT)\n", addr);
		return -1;
	}
	H->write = write;
	H->health = health;
	H->arg = arg;
	H->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	setsockopt(H->fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	if (H->fd < 0 || bind(H->fd, (struct sockaddr *)&a, sizeof a) || listen(H->fd, 16) ||
	    pthread_create(&H->thread, NULL, serve, H)) {
		fprintf(stderr, "l7run: --metrics-listen %s: %s\n", addr, strerror(errno));
		if (H->fd >= 0)
			close(H->fd);
		H->fd = -1;
		return -1;
	}
	return 0;
}

void metrics_http_stop(struct metrics_http *H)
{
	if (H->fd < 0)
		return;
	shutdown(H->fd, SHUT_RDWR);   /* wakes the blocked accept */
	pthread_join(H->thread, NULL);
	close(H->fd);
	H->fd = -1;
}

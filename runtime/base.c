/* Clocks, socket cookies and rate-limited notes, for every layer of l7run (base.h). */
#include <time.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include "base.h"

uint64_t now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

uint64_t now_ms(void)
{
	return now_us() / 1000;
}

uint64_t sock_cookie(int fd)
{
	uint64_t c = 0;
	socklen_t l = sizeof c;
	if (getsockopt(fd, SOL_SOCKET, SO_COOKIE, &c, &l))
		return 0;
	return c;
}

unsigned long long rate_note(struct rate_note *r)
{
	uint64_t now = now_ms();

	r->n++;
	if (r->at && now - r->at < 10000)
		return 0;
	unsigned long long n = r->n;
	r->n = 0;
	r->at = now;
	return n;
}

int same_file(const struct stat *a, const struct stat *b)
{
	return a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec &&
	       a->st_size == b->st_size && a->st_ino == b->st_ino;
}

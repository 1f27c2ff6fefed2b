"""Reading l7run's Prometheus text, and what its per-upstream telemetry must have counted."""


def samples(text):
    """Prometheus text -> {'name{labels}': value}."""
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            key, _, val = line.rpartition(" ")
            out[key] = int(float(val))
    return out


class UpstreamTally:
    """The counts the l7_upstream_* and l7_local_* series must grow by: the bytes a client sent
    to each upstream and the responses it read (by status class, and their bytes)."""

    def __init__(self):
        self.want = {}

    def add(self, key, n):
        self.want[key] = self.want.get(key, 0) + n

    def request(self, upstream, nbytes):
        self.add('l7_upstream_request_bytes_total{upstream="%s"}' % upstream, nbytes)

    def response(self, upstream, status, nbytes):
        """A response of nbytes read from upstream (None: l7run's own answer)."""
        if upstream is None:
            self.add('l7_local_responses_total{class="%dxx"}' % (status // 100), 1)
            self.add("l7_local_response_bytes_total", nbytes)
        else:
            self.add('l7_upstream_responses_total{upstream="%s",class="%dxx"}' % (upstream, status // 100), 1)
            self.add('l7_upstream_response_bytes_total{upstream="%s"}' % upstream, nbytes)

    @staticmethod
    def deltas(before, after):
        """The telemetry series of a scrape and how much each grew since `before`."""
        keys = [k for k in after if k.startswith(("l7_upstream_", "l7_local_"))]
        return keys, {k: after[k] - before.get(k, 0) for k in keys}

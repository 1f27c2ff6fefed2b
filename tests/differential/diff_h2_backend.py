#!/usr/bin/python3
"""Recording h2c backends for the HTTP/2 differential test: one process, one listener per
upstream (NAME=PORT arguments), python3-h2 as the server. Every request stream is logged when
its header block arrives, as one line "NAME ID HEXMETHOD HEXPATH" in LOG (ID: its x-diff-id, or
- without one), and answered at its end with 200 and the body "backend=NAME" (the test reads
who served each stream). Prints "ready" once listening."""
import socket
import sys
import threading

import h2.config
import h2.connection
import h2.events
import h2.exceptions

lock = threading.Lock()


def log(f, line):
    with lock:
        f.write(line + "\n")
        f.flush()


def serve(conn, name, f):
    cfg = h2.config.H2Configuration(client_side=False, header_encoding=None,
                                    validate_inbound_headers=False, normalize_inbound_headers=False)
    h = h2.connection.H2Connection(config=cfg)
    h.initiate_connection()
    try:
        conn.sendall(h.data_to_send())
        while True:
            data = conn.recv(65536)
            if not data:
                return
            for ev in h.receive_data(data):
                if isinstance(ev, h2.events.RequestReceived):
                    hs = dict(ev.headers)
                    log(f, "%s %s %s %s" % (name, (hs.get(b"x-diff-id") or b"-").decode("latin-1"),
                                            (hs.get(b":method") or b"").hex() or "-",
                                            (hs.get(b":path") or b"").hex() or "-"))
                elif isinstance(ev, h2.events.DataReceived):
                    h.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
                elif isinstance(ev, h2.events.StreamEnded):
                    try:
                        h.send_headers(ev.stream_id, [(b":status", b"200"), (b"content-type", b"text/plain")])
                        h.send_data(ev.stream_id, b"backend=" + name.encode(), end_stream=True)
                    except h2.exceptions.H2Error:
                        pass
            conn.sendall(h.data_to_send())
    except (OSError, h2.exceptions.H2Error):
        return
    finally:
        conn.close()


def listen(name, port, f):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", port))
    s.listen(256)

    def accept():
        while True:
            c, _ = s.accept()
            threading.Thread(target=serve, args=(c, name, f), daemon=True).start()
    threading.Thread(target=accept, daemon=True).start()


def main():
    f = open(sys.argv[1], "a")
    for arg in sys.argv[2:]:
        name, port = arg.rsplit("=", 1)
        listen(name, int(port), f)
    print("ready", flush=True)
    threading.Event().wait()


if __name__ == "__main__":
    main()

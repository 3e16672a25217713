"""'The internet' of an egress test: servers in a peer network namespace the test created.

Runs as `unshare -n python peer.py`; the lab moves a veth end in and configures it, then
writes `go`; this answers `ready` once serving. TCP 8080 answers `pong:<data>`, UDP 8081
echoes; every accepted connection and datagram is counted. `report` prints the counts.
"""

from __future__ import annotations

import json
import socket
import sys
import threading

COUNTS = {"tcp_accepted": 0, "udp_received": 0}
LOCK = threading.Lock()


def count(key: str) -> None:
    with LOCK:
        COUNTS[key] += 1


def tcp_server(server: socket.socket) -> None:
    def serve(conn: socket.socket) -> None:
        with conn:
            conn.settimeout(5)
            try:
                data = conn.recv(1024)
                conn.sendall(b"pong:" + data)
            except OSError:
                pass

    while True:
        conn, _ = server.accept()
        count("tcp_accepted")
        threading.Thread(target=serve, args=(conn,), daemon=True).start()


def udp_server(server: socket.socket) -> None:
    while True:
        data, peer = server.recvfrom(65535)
        count("udp_received")
        server.sendto(b"echo:" + data, peer)


def main() -> None:
    if sys.stdin.readline().strip() != "go":
        return
    for family, host in ((socket.AF_INET, "10.77.0.2"), (socket.AF_INET6, "2001:db8:77::2")):
        tcp = socket.socket(family, socket.SOCK_STREAM)
        tcp.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        tcp.bind((host, 8080))
        tcp.listen(64)
        udp = socket.socket(family, socket.SOCK_DGRAM)
        udp.bind((host, 8081))
        threading.Thread(target=tcp_server, args=(tcp,), daemon=True).start()
        threading.Thread(target=udp_server, args=(udp,), daemon=True).start()
    print("ready", flush=True)
    for line in sys.stdin:
        if line.strip() == "report":
            with LOCK:
                print(json.dumps(COUNTS), flush=True)


if __name__ == "__main__":
    main()

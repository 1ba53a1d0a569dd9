"""A webhook endpoint that accepts connections and never answers (or drips one byte every
second of an endless body with "drip"), to check the server's webhook deadline.

Usage: webhook_hang.py [hang|drip]
Prints "port N", then {"open": n, "total": t} each time a connection opens or closes. Runs
until killed.
"""
import json
import socket
import sys
import threading
import time

mode = sys.argv[1] if len(sys.argv) > 1 else "hang"
lock = threading.Lock()
counts = {"open": 0, "total": 0}


def report():
    print(json.dumps(counts), flush=True)


def serve(connection):
    with lock:
        counts["open"] += 1
        counts["total"] += 1
        report()
    try:
        connection.settimeout(60)
        connection.recv(65536)
        if mode == "drip":
            connection.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 100000000\r\n\r\n")
            for _ in range(60):
                connection.sendall(b"x" * 100000)
                time.sleep(0.05)
        else:
            while connection.recv(65536):
                pass
    except OSError:
        pass
    finally:
        connection.close()
        with lock:
            counts["open"] -= 1
            report()


listener = socket.socket()
listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
listener.bind(("127.0.0.1", 0))
listener.listen(16)
print(f"port {listener.getsockname()[1]}", flush=True)
while True:
    client, _ = listener.accept()
    threading.Thread(target=serve, args=(client,), daemon=True).start()

# A fake tmux server, as an agent would write one after moving the real
# server's socket aside. It speaks tmux 3.x's client protocol (imsg
# framing, protocol version 8) and answers every client in one of two ways:
#   shell PATH   MSG_SHELL: the client execs PATH ("the shell").
#   stream N     MSG_WRITE_OPEN of the client's stdout, then N bytes of
#                MSG_WRITE (as fast as the client takes them), then MSG_EXIT.
#   hang -       nothing: it reads what the client sends and never answers.
# Usage: python3 fake_tmux.py SOCKET shell PATH | SOCKET stream N | SOCKET hang -
import os, socket, struct, sys, threading

PROTOCOL_VERSION = 8
MSG_EXIT, MSG_SHELL = 203, 209
MSG_WRITE_OPEN, MSG_WRITE = 303, 304


def send(conn, kind, data=b""):
    # struct imsg_hdr { u32 type; u16 len; u16 flags; u32 peerid; u32 pid; }
    conn.sendall(struct.pack("=IHHII", kind, 16 + len(data), 0, PROTOCOL_VERSION, os.getpid()) + data)


def drain(conn):
    try:
        while conn.recv(65536):
            pass
    except OSError:
        pass


def serve(conn, mode, arg):
    threading.Thread(target=drain, args=(conn,), daemon=True).start()
    try:
        if mode == "shell":
            send(conn, MSG_SHELL, arg.encode() + b"\0")
        elif mode == "hang":
            pass
        else:
            left = int(arg)
            send(conn, MSG_WRITE_OPEN, struct.pack("=iii", 1, 1, 0))
            chunk = b"x" * 16000
            while left > 0:
                n = min(left, len(chunk))
                send(conn, MSG_WRITE, struct.pack("=i", 1) + chunk[:n])
                left -= n
            send(conn, MSG_EXIT, struct.pack("=i", 0))
    except OSError:
        pass


def main():
    path, mode, arg = sys.argv[1], sys.argv[2], sys.argv[3]
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path)
    srv.listen(64)
    while True:
        conn, _ = srv.accept()
        threading.Thread(target=serve, args=(conn, mode, arg), daemon=True).start()


main()

"""Serve the console's files from the working tree in front of a running agentry server.

The server embeds `crates/agentry-console/assets/` when it is built; to try a change to those
files without rebuilding, run this proxy and open its address instead of the server's:

    python3 tests/console/serve_assets.py --backend http://127.0.0.1:3141 --port 3142

`/console` and everything under it is answered from the files on disk, as the server would
(index.html for every view, `assets/<path>` for the files, the same Content-Security-Policy);
every other request (the API, its event streams, the WebSockets) goes to the backend unchanged.
Standard library only; one connection per request.
"""

import argparse
import asyncio
import json
import mimetypes
import pathlib
import sys
from urllib.parse import urlsplit

ASSETS = pathlib.Path(__file__).resolve().parents[2] / "crates" / "agentry-console" / "assets"
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'self'; "
    "form-action 'self'"
)
TYPES = {
    ".html": "text/html; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".json": "application/json",
    ".svg": "image/svg+xml",
    ".png": "image/png",
}


def console_response(path: str) -> bytes:
    status, ctype, body = "200 OK", TYPES[".html"], None
    if path.startswith("/console/assets/"):
        rel = path[len("/console/assets/"):]
        file = (ASSETS / rel).resolve()
        if ASSETS in file.parents and file.is_file():
            ctype = TYPES.get(file.suffix) or mimetypes.guess_type(file.name)[0] or "application/octet-stream"
            body = file.read_bytes()
        else:
            status, ctype = "404 Not Found", "application/json"
            body = json.dumps({"success": False, "error": f"No file {rel} in /console/assets/"}).encode()
    else:
        body = (ASSETS / "index.html").read_bytes()
    head = (
        f"HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {len(body)}\r\n"
        f"Cache-Control: no-cache\r\nContent-Security-Policy: {CSP}\r\n"
        "X-Content-Type-Options: nosniff\r\nConnection: close\r\n\r\n"
    )
    return head.encode() + body


async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, asyncio.CancelledError):
        pass
    finally:
        try:
            writer.close()
        except Exception:
            pass


async def handle(reader, writer, backend):
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
        writer.close()
        return
    lines = head.decode("latin-1").split("\r\n")
    try:
        _method, target, _version = lines[0].split(" ", 2)
    except ValueError:
        writer.close()
        return
    path = urlsplit(target).path
    if path == "/console" or path.startswith("/console/"):
        writer.write(console_response(path))
        await writer.drain()
        writer.close()
        return
    # To the backend, one request per connection (so that the next /console request comes back
    # here), except a WebSocket upgrade, which keeps its connection.
    upgrade = any(l.lower().startswith("upgrade:") for l in lines[1:])
    kept = [l for l in lines[1:] if l and not (not upgrade and l.lower().startswith(("connection:", "keep-alive:")))]
    if not upgrade:
        kept.append("Connection: close")
    new_head = ("\r\n".join([lines[0], *kept]) + "\r\n\r\n").encode("latin-1")
    try:
        b_reader, b_writer = await asyncio.open_connection(*backend)
    except OSError:
        writer.write(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
        writer.close()
        return
    b_writer.write(new_head)
    await b_writer.drain()
    up = asyncio.ensure_future(pipe(reader, b_writer))
    await pipe(b_reader, writer)
    up.cancel()


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backend", required=True, help="the agentry server, e.g. http://127.0.0.1:3141")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    b = urlsplit(args.backend)
    backend = (b.hostname, b.port or 80)
    server = await asyncio.start_server(lambda r, w: handle(r, w, backend), args.host, args.port)
    host, port = server.sockets[0].getsockname()[:2]
    print(f"console assets proxy listening on http://{host}:{port}", flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        sys.exit(0)

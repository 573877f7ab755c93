#!/usr/bin/env python3
"""A TCP proxy that can stall, put between mercer's replicas and the S3 server by
scripts/cluster.sh to play a store that is hung or slow.

    python3 scripts/stall_proxy.py LISTEN_PORT UPSTREAM_HOST:UPSTREAM_PORT MODE_FILE

MODE_FILE holds one word, read again for every chunk that passes (absent or unreadable:
pass):
  pass  bytes go through both ways;
  hang  connections are accepted and requests read, but nothing more is forwarded either
        way and no answer ever comes (a store that accepts and never answers);
  slow  the start of every request (a chunk beginning with an HTTP method) waits one second
        before it is forwarded: a second per call, whatever its size.
Standard library only; stopped by SIGTERM.
"""
import asyncio
import signal
import sys

METHODS = (b"GET ", b"PUT ", b"POST ", b"HEAD ", b"DELETE ", b"PATCH ", b"OPTIONS ")


def mode(path):
    try:
        with open(path) as f:
            return f.read().strip() or "pass"
    except OSError:
        return "pass"


async def pump(reader, writer, mode_file, requests):
    """Copies reader to writer until EOF; `requests` marks the client-to-store direction."""
    try:
        while True:
            chunk = await reader.read(1 << 16)
            if not chunk:
                break
            m = mode(mode_file)
            if m == "hang":
                continue  # read and dropped: nothing goes through while hung
            if m == "slow" and requests and chunk.startswith(METHODS):
                await asyncio.sleep(1.0)
            writer.write(chunk)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        try:
            writer.close()
        except OSError:
            pass


async def handle(client_reader, client_writer, upstream, mode_file):
    host, port = upstream
    try:
        up_reader, up_writer = await asyncio.open_connection(host, port)
    except OSError:
        client_writer.close()  # the store itself is down: as a refused connection
        return
    await asyncio.gather(
        pump(client_reader, up_writer, mode_file, True),
        pump(up_reader, client_writer, mode_file, False),
    )


async def main():
    listen_port, upstream, mode_file = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    host, port = upstream.rsplit(":", 1)
    server = await asyncio.start_server(
        lambda r, w: handle(r, w, (host, int(port)), mode_file), "127.0.0.1", listen_port)
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    async with server:
        await stop.wait()


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    asyncio.run(main())

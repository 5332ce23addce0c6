"""An independent WebSocket client of the bridge: Python websockets (Debian's
python3-websockets). Driven by e2e/clients_test.go like clients/node/ws_client.js:
argv[1] is a JSON plan, stdout gets one JSON event per line. The library cannot
send an unmasked client frame, so that scenario is Node's only."""

import asyncio
import json
import ssl
import sys

import websockets


def out(ev):
    sys.stdout.write(json.dumps(ev) + "\n")
    sys.stdout.flush()


PONGS = []


async def fragmented(ws, buf, n):
    """Sends buf as one message in n fragments, a ping before each."""
    step = -(-len(buf) // n)

    async def parts():
        for i in range(0, len(buf), step):
            PONGS.append(await ws.ping(b"p%d" % (len(PONGS))))
            out({"event": "ping"})
            yield buf[i:i + step]

    await ws.send(parts())


async def await_pongs():
    for waiter in PONGS:
        await asyncio.wait_for(waiter, 5)
        out({"event": "pong"})


async def read_echo(ws, want):
    got = b""
    while len(got) < want:
        msg = await ws.recv()
        if isinstance(msg, str):
            raise ValueError("text message from the bridge")
        got += msg
    out({"event": "echo", "hex": got.hex()})


async def run(plan):
    ctx = None
    if plan["url"].startswith("wss:"):
        ctx = ssl.create_default_context(cafile=plan["ca"])
    register = bytes.fromhex(plan["register"])
    data = bytes.fromhex(plan.get("data") or "")
    try:
        ws = await websockets.connect(plan["url"], subprotocols=["wirekube.relay.v1"],
                                      extra_headers=plan.get("headers") or {}, ssl=ctx,
                                      max_size=None, compression=None, ping_interval=None)
    except websockets.exceptions.InvalidStatusCode as e:
        out({"event": "refused", "status": e.status_code,
             "reason": e.headers.get("X-WireKube-Deny-Reason", "") if hasattr(e, "headers") else ""})
        return
    out({"event": "open", "protocol": ws.subprotocol})
    sc = plan["scenario"]
    if sc == "fragments":
        await fragmented(ws, register, 3)
        await fragmented(ws, data, 7)
        await read_echo(ws, len(data))
        await await_pongs()
        await ws.close(1000, "done")
    elif sc == "max":
        await ws.send(register)
        await ws.send(data)
        await read_echo(ws, len(data))
        await ws.send(bytes.fromhex(plan["oversized"]))
    elif sc == "client_close":
        await ws.send(register)
        await ws.close(4000, "client-reason")
    elif sc == "server_close":
        await ws.send(register)
    elif sc == "text":
        await ws.send(register)
        await ws.send("hello")
    else:
        out({"event": "error", "message": "unknown scenario " + sc})
        return
    try:
        while True:
            msg = await ws.recv()
            out({"event": "message", "len": len(msg)})
    except websockets.exceptions.ConnectionClosed:
        pass
    # The close frame the bridge sent (or, after our own close, its answer).
    out({"event": "close", "code": ws.close_code, "reason": ws.close_reason or ""})


def main():
    with open(sys.argv[1]) as f:
        plan = json.load(f)
    asyncio.run(asyncio.wait_for(run(plan), 15))


if __name__ == "__main__":
    main()

// An independent WebSocket client of the bridge: Node's ws (package.json pins
// it). Driven by e2e/clients_test.go: argv[2] is a JSON plan, stdout gets one
// JSON event per line; the Go test checks them against the contract.
//
// Plan: {url, headers, ca, scenario, register, data, oversized} with frames
// as hex. Scenarios:
//   fragments     Register split over three fragments, then a Data frame to
//                 ourselves over seven, a ping before every fragment; wait for
//                 the echo; close 1000.
//   max           the largest relay frame in one message, then a frame header
//                 of 65,537 (the bridge closes 1009 frame_too_large).
//   client_close  close with 4000 and a reason; the bridge echoes the code.
//   server_close  Register with another key (1008 register_key_mismatch).
//   text          a text message (1003 text_message).
//   unmasked      an unmasked binary frame (1002 websocket_protocol_error).
'use strict';
const fs = require('fs');
const WebSocket = require('ws');

const plan = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
const hex = (s) => Buffer.from(s || '', 'hex');
// exit leaves once everything written to stdout is flushed: on a pipe
// Node writes asynchronously, and process.exit() right after a large line
// (the max scenario's echo is 128 KiB of hex) cut it off. Nothing is
// printed once exit is decided, as when the process ended there.
let exiting = false;
const out = (ev) => { if (!exiting) process.stdout.write(JSON.stringify(ev) + '\n'); };
const exit = (code) => {
  if (exiting) return;
  exiting = true;
  process.stdout.write('', () => process.exit(code));
};

const opts = { headers: plan.headers || {}, maxPayload: 1 << 24, perMessageDeflate: false };
if (plan.ca) opts.ca = fs.readFileSync(plan.ca);
const ws = new WebSocket(plan.url, ['wirekube.relay.v1'], opts);

let received = Buffer.alloc(0);
const expectEcho = hex(plan.data);
const timer = setTimeout(() => { out({ event: 'timeout' }); exit(2); }, 15000);

ws.on('unexpected-response', (req, res) => {
  out({ event: 'refused', status: res.statusCode, reason: res.headers['x-wirekube-deny-reason'] || '' });
  exit(0);
});
ws.on('error', (err) => out({ event: 'error', message: String(err.message || err) }));
ws.on('pong', () => out({ event: 'pong' }));
ws.on('close', (code, reason) => {
  out({ event: 'close', code, reason: reason.toString('utf8') });
  clearTimeout(timer);
  exit(0);
});
ws.on('message', (data, isBinary) => {
  received = Buffer.concat([received, data]);
  if (expectEcho.length > 0 && received.length >= expectEcho.length) {
    out({ event: 'echo', hex: received.toString('hex') });
    received = Buffer.alloc(0);
    afterEcho();
  }
});

// fragmented sends buf as one message in n fragments, a ping before each.
function fragmented(buf, n) {
  const step = Math.ceil(buf.length / n);
  for (let i = 0; i < buf.length; i += step) {
    ws.ping(Buffer.from('p' + i));
    out({ event: 'ping' });
    ws.send(buf.subarray(i, i + step), { binary: true, fin: i + step >= buf.length });
  }
}

let echoed = false;
function afterEcho() {
  if (echoed) return;
  echoed = true;
  switch (plan.scenario) {
    case 'fragments': ws.close(1000, 'done'); break;
    case 'max': ws.send(hex(plan.oversized), { binary: true }); break;
  }
}

ws.on('open', () => {
  out({ event: 'open', protocol: ws.protocol });
  const register = hex(plan.register);
  switch (plan.scenario) {
    case 'fragments':
      fragmented(register, 3);
      fragmented(hex(plan.data), 7);
      break;
    case 'max':
      ws.send(register, { binary: true });
      ws.send(hex(plan.data), { binary: true });
      break;
    case 'client_close':
      ws.send(register, { binary: true });
      ws.close(4000, 'client-reason');
      break;
    case 'server_close':
      ws.send(register, { binary: true });
      break;
    case 'text':
      ws.send(register, { binary: true });
      ws.send('hello', { binary: false });
      break;
    case 'unmasked':
      ws.send(register, { binary: true });
      ws.send(Buffer.from([0, 0, 0, 1, 3]), { binary: true, mask: false });
      break;
    default:
      out({ event: 'error', message: 'unknown scenario ' + plan.scenario });
      exit(2);
  }
});

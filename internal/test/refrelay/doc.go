// Package refrelay is a TEST FIXTURE: a small reference implementation of the
// raw WireKube relay (v0.0.17, docs/spec.md#raw-relay) that the unit tests, the
// benchmark baseline and the local demo talk to. It is not the production
// relay, it is never built into an image, and it has no authentication at
// all (any client may register any key, exactly like the raw relay).
//
// What it does, frame by frame:
//
//   - The first frame decides the session. Register with a 32-byte body opens
//     a peer session. ForwarderRegister (0x10), ForwarderUnregister (0x11) or
//     IngressProbe (0x13) open a one-shot control session, which this fixture
//     refuses: it answers one Error frame with the text ControlRefusedText and
//     closes. Anything else (including a Register of the wrong size and
//     ForwarderStats, 0x12) closes the connection without an answer.
//   - Data (32-byte destination key + payload) is delivered to the session
//     registered under the destination key with the key rewritten to the
//     sender's key; Data to your own key comes back to you. BimodalHint is
//     rewritten the same way. Data to a key nobody registered is dropped.
//   - Keepalive, NATProbe, RelayProbe and ExternalData are accepted and
//     ignored (the fixture implements no NAT answer, no probe and no ingress).
//     A second Register and every other type are logged as unknown and
//     ignored, once per frame, as the real relay does.
//   - A Register for a key that is already registered replaces the older
//     session, whose connection is closed.
//   - Each destination has a bounded queue (Options.QueueDepth, 256); when it
//     is full the newest frame is dropped and counted. A reader that blocks a
//     write for Options.WriteStallTimeout (2 s) is disconnected. There is no
//     read idle timeout, not even for the first frame.
//   - Frames with N == 0 or N > 65536 close the connection before any body
//     byte is read.
//   - When the listener is TCP it also opens a UDP socket on the same address,
//     as the real relay does for NAT probes, and reads and drops every packet.
//
// Tests observe the relay through Server.Stats, Server.Registered,
// Server.RegisterCount and Server.WaitRegistered, and act on it through the
// Server.Inject and Server.Disconnect hooks; the refrelaytest
// subpackage starts one on a loopback port for a test.
package refrelay

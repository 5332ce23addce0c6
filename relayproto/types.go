package relayproto

import "fmt"

// FrameType is the type byte of a frame.
type FrameType byte

// Frame types of WireKube v0.0.17 and the layout of each body.
const (
	// TypeRegister: 32-byte public key. Agent, first frame only.
	TypeRegister FrameType = 0x01
	// TypeData: 32-byte destination key + payload. The relay rewrites the
	// key to the source key on delivery. Both directions.
	TypeData FrameType = 0x02
	// TypeKeepalive: empty. Agent every 25 s; the relay ignores it.
	TypeKeepalive FrameType = 0x03
	// TypeNATProbe: 4-byte IPv4 + 2-byte big-endian port. Agent.
	TypeNATProbe FrameType = 0x04
	// TypeBimodalHint: 32-byte destination key, rewritten by the relay to
	// the sender's key. Both directions.
	TypeBimodalHint FrameType = 0x05
	// TypeRelayProbe: 8-byte token. The relay asks, the agent echoes.
	TypeRelayProbe FrameType = 0x06

	// TypeForwarderRegister: 2-byte port + 32-byte ingress key + 32-byte
	// external key. Control tool, first frame of a one-shot connection.
	TypeForwarderRegister FrameType = 0x10
	// TypeForwarderUnregister: 2-byte port. Control tool, one-shot.
	TypeForwarderUnregister FrameType = 0x11
	// TypeForwarderStats: request 2-byte port; response port + 3x8 bytes.
	TypeForwarderStats FrameType = 0x12
	// TypeIngressProbe: 2-byte count + count x 32-byte keys. Control, one-shot.
	TypeIngressProbe FrameType = 0x13

	// TypeExternalData: 8-byte token + 2-byte address length + address +
	// payload. Both directions (ingress agents).
	TypeExternalData FrameType = 0x20

	// Relay-to-relay only; never sent by an agent.
	TypeClusterEnvelope       FrameType = 0x21
	TypeClusterExternalReply  FrameType = 0x22
	TypeClusterExternalFanout FrameType = 0x23

	// TypeError: UTF-8 text. Relay.
	TypeError FrameType = 0xFF
)

var typeNames = map[FrameType]string{
	TypeRegister:              "register",
	TypeData:                  "data",
	TypeKeepalive:             "keepalive",
	TypeNATProbe:              "nat_probe",
	TypeBimodalHint:           "bimodal_hint",
	TypeRelayProbe:            "relay_probe",
	TypeForwarderRegister:     "forwarder_register",
	TypeForwarderUnregister:   "forwarder_unregister",
	TypeForwarderStats:        "forwarder_stats",
	TypeIngressProbe:          "ingress_probe",
	TypeExternalData:          "external_data",
	TypeClusterEnvelope:       "cluster_envelope",
	TypeClusterExternalReply:  "cluster_external_reply",
	TypeClusterExternalFanout: "cluster_external_fanout",
	TypeError:                 "error",
}

// String is a lower-case name usable as a metric label; unknown types are
// all "unknown" so a label set stays bounded whatever a client sends.
func (t FrameType) String() string {
	if s, ok := typeNames[t]; ok {
		return s
	}
	return "unknown"
}

// GoString shows the byte value too, for test failures and debugging.
func (t FrameType) GoString() string { return fmt.Sprintf("%s(0x%02x)", t, byte(t)) }

// Known reports whether t is a type of the protocol.
func (t FrameType) Known() bool { _, ok := typeNames[t]; return ok }

// IsControl reports whether t opens a one-shot control session on the raw
// relay when sent as a first frame (0x10-0x13).
func (t FrameType) IsControl() bool { return t >= TypeForwarderRegister && t <= TypeIngressProbe }

// IsRelayToRelay reports whether t is reserved for relay-to-relay links.
func (t FrameType) IsRelayToRelay() bool {
	return t >= TypeClusterEnvelope && t <= TypeClusterExternalFanout
}

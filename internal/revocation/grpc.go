package revocation

import (
	"fmt"

	"google.golang.org/grpc"

	"github.com/wirekube/relay-ws/internal/revocation/revocationpb"
)

// The Watch stream is the gRPC bidirectional stream of revocation.proto
// (revocationpb), served on extauthz's --revocation-listen only. Both ends
// go through Send and the RecvFrom functions, which validate every message
// (fromBridge, fromExtauthz) before anything else reads it.
const (
	ServiceName = "wirekube.relay.revocation.v2.Revocation"
	WatchMethod = revocationpb.Revocation_Watch_FullMethodName
)

// StreamDesc describes Watch for a client's ClientConn.NewStream.
var StreamDesc = revocationpb.Revocation_ServiceDesc.Streams[0]

// WatchServer serves the Watch stream.
type WatchServer interface {
	Watch(stream grpc.ServerStream) error
}

// watchAdapter turns a WatchServer into the generated RevocationServer.
type watchAdapter struct {
	revocationpb.UnimplementedRevocationServer
	srv WatchServer
}

func (a watchAdapter) Watch(s grpc.BidiStreamingServer[revocationpb.BridgeMessage, revocationpb.ExtauthzMessage]) error {
	return a.srv.Watch(s)
}

// Register registers srv on s as revocationpb.Revocation.
func Register(s grpc.ServiceRegistrar, srv WatchServer) {
	revocationpb.RegisterRevocationServer(s, watchAdapter{srv: srv})
}

// Stream is the side of the stream both ends have: grpc.ServerStream and
// grpc.ClientStream implement it.
type Stream interface {
	SendMsg(m any) error
	RecvMsg(m any) error
}

// Send sends ops in as many messages as Batches needs. ops are all of one
// end's kinds (FromBridge or FromExtauthz); mixing them is a caller bug.
func Send(s Stream, ops []Op) error {
	for _, batch := range Batches(ops) {
		var m any
		if batch[0].Kind.FromBridge() {
			m = toBridge(batch)
		} else {
			m = toExtauthz(batch)
		}
		if err := s.SendMsg(m); err != nil {
			return err
		}
	}
	return nil
}

// RecvFromBridge receives and validates one message of the bridge.
func RecvFromBridge(s Stream) ([]Op, error) {
	var m revocationpb.BridgeMessage
	if err := s.RecvMsg(&m); err != nil {
		return nil, err
	}
	return fromBridge(&m)
}

// RecvFromExtauthz receives and validates one message of extauthz.
func RecvFromExtauthz(s Stream) ([]Op, error) {
	var m revocationpb.ExtauthzMessage
	if err := s.RecvMsg(&m); err != nil {
		return nil, err
	}
	ops, err := fromExtauthz(&m)
	if err != nil {
		return nil, fmt.Errorf("from extauthz: %w", err)
	}
	return ops, nil
}

package revocation

import (
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// The Watch stream is a gRPC bidirectional stream on extauthz's gRPC
// listener. Each gRPC message is a google.protobuf.BytesValue whose value
// is one message of this package (Encode/Decode): no generated code, and
// the bytes another process sends go through one strict, fuzzed decoder.
const (
	ServiceName = "wirekube.relay.revocation.v1.Revocation"
	WatchMethod = "/" + ServiceName + "/Watch"
)

// StreamDesc describes Watch for a client's ClientConn.NewStream.
var StreamDesc = grpc.StreamDesc{StreamName: "Watch", ServerStreams: true, ClientStreams: true}

// WatchServer serves the Watch stream.
type WatchServer interface {
	Watch(stream grpc.ServerStream) error
}

// Register registers srv on s.
func Register(s *grpc.Server, srv WatchServer) {
	s.RegisterService(&grpc.ServiceDesc{
		ServiceName: ServiceName,
		HandlerType: (*WatchServer)(nil),
		Streams: []grpc.StreamDesc{{
			StreamName:    "Watch",
			ServerStreams: true,
			ClientStreams: true,
			Handler: func(srv any, stream grpc.ServerStream) error {
				return srv.(WatchServer).Watch(stream)
			},
		}},
	}, srv)
}

// Stream is the side of the stream both ends have: grpc.ServerStream and
// grpc.ClientStream implement it.
type Stream interface {
	SendMsg(m any) error
	RecvMsg(m any) error
}

// Send sends ops in as many messages as Batches needs.
func Send(s Stream, ops []Op) error {
	for _, batch := range Batches(ops) {
		if err := s.SendMsg(&wrapperspb.BytesValue{Value: Encode(nil, batch)}); err != nil {
			return err
		}
	}
	return nil
}

// Recv receives and decodes one message, keeping only the kinds allowed
// from the other end: any other kind is ErrMessage.
func Recv(s Stream, allowed func(Kind) bool) ([]Op, error) {
	var m wrapperspb.BytesValue
	if err := s.RecvMsg(&m); err != nil {
		return nil, err
	}
	ops, err := Decode(m.GetValue())
	if err != nil {
		return nil, err
	}
	for _, op := range ops {
		if !allowed(op.Kind) {
			return nil, fmt.Errorf("%w: kind %#x from the wrong end", ErrMessage, byte(op.Kind))
		}
	}
	return ops, nil
}

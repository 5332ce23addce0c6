package revocationhub

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/reflection"

	"github.com/wirekube/relay-ws/internal/netutil"
	"github.com/wirekube/relay-ws/internal/revocation"
)

// streamWindow is the fixed HTTP/2 flow-control window of the revocation
// listener (per stream and per connection; a fixed window also turns off
// gRPC's BDP growth up to 16 MiB): with the pending bound (maxPendingOps)
// it bounds what one bridge can make extauthz buffer.
const streamWindow = 64 << 10

// NewServer is the gRPC server of --revocation-listen: the Watch
// stream behind the secret, and reflection (the schema only). It shares
// nothing with the ext_authz listener.
func NewServer(hub *Hub, secret string) *grpc.Server {
	gs := grpc.NewServer(append(Keepalive(),
		grpc.MaxRecvMsgSize(revocation.MaxMessage),
		grpc.InitialWindowSize(streamWindow),
		grpc.InitialConnWindowSize(streamWindow),
		grpc.StreamInterceptor(hub.authenticate(secret)),
	)...)
	revocation.Register(gs, hub)
	reflection.Register(gs)
	return gs
}

// authenticate lets a Watch call through only with the secret
// (revocation.CheckSecret); reflection needs none. Fail closed: any
// other method of the revocation service is checked too.
func (h *Hub) authenticate(secret string) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		if strings.HasPrefix(info.FullMethod, "/"+revocation.ServiceName+"/") {
			if err := revocation.CheckSecret(ss.Context(), secret); err != nil {
				h.metrics.refused.WithLabelValues(refusedUnauthenticated).Inc()
				h.log.Warn("revocation stream refused: no or a wrong secret")
				return err
			}
		}
		return handler(srv, ss)
	}
}

// Listen writes a fresh secret, then opens the revocation
// listener (in that order: whoever connects reads the new secret). For a
// Unix socket the file is made owner- and group-writable only (the
// bridge may run under another UID of the Pod's fsGroup).
func Listen(o Options) (net.Listener, string, error) {
	secret := revocation.NewSecret()
	if err := revocation.WriteSecretFile(o.RevocationSecretFile, secret); err != nil {
		return nil, "", fmt.Errorf("--revocation-secret-file: %w (mount the directory the bridge shares, docs/revocation.md)", err)
	}
	ln, err := netutil.Listen(o.RevocationListen)
	if err != nil {
		return nil, "", fmt.Errorf("--revocation-listen: %w", err)
	}
	if path, ok := strings.CutPrefix(o.RevocationListen, "unix:"); ok {
		if err := os.Chmod(path, 0o660); err != nil {
			ln.Close()
			return nil, "", fmt.Errorf("--revocation-listen: %w", err)
		}
	}
	return ln, secret, nil
}

// Serve serves gs on ln until ctx is done, then stops it (the
// hub has ended its streams by then) and removes the secret file.
func Serve(ctx context.Context, gs *grpc.Server, ln net.Listener, secretFile string, log *slog.Logger) error {
	errc := make(chan error, 1)
	go func() { errc <- gs.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("revocation serve: %w", err)
	case <-ctx.Done():
	}
	gs.Stop()
	<-errc
	if err := os.Remove(secretFile); err != nil && !errors.Is(err, os.ErrNotExist) {
		log.Warn("revocation secret file not removed", slog.String("error", err.Error()))
	}
	return nil
}

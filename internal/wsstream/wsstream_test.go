package wsstream

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gorilla/websocket"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// serve sends msgs to every client, one WebSocket message each, then closes.
func serve(t *testing.T, msgs []message) *websocket.Conn {
	t.Helper()
	up := websocket.Upgrader{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer c.Close()
		for _, m := range msgs {
			if err := c.WriteMessage(m.typ, m.data); err != nil {
				return
			}
		}
		_ = c.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""))
	}))
	t.Cleanup(srv.Close)
	c, _, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(srv.URL, "http"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

type message struct {
	typ  int
	data []byte
}

func bin(s string) message { return message{websocket.BinaryMessage, []byte(s)} }

func TestReader(t *testing.T) {
	tests := []struct {
		name    string
		msgs    []message
		want    string
		wantErr error
	}{
		{"one message", []message{bin("abcdef")}, "abcdef", nil},
		{"split and empty messages", []message{bin("ab"), bin(""), bin("cde"), bin("f")}, "abcdef", nil},
		{"text message", []message{bin("ab"), {websocket.TextMessage, []byte("x")}}, "ab", ErrTextMessage},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := NewReader(serve(t, tc.msgs))
			var got bytes.Buffer
			buf := make([]byte, 3)
			var err error
			for {
				var n int
				n, err = r.Read(buf)
				if n == 0 && err == nil {
					t.Fatal("Read returned (0, nil)")
				}
				got.Write(buf[:n])
				if err != nil {
					break
				}
			}
			if got.String() != tc.want {
				t.Fatalf("read %q, want %q", got.String(), tc.want)
			}
			if tc.wantErr != nil && !errors.Is(err, tc.wantErr) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			var ce *websocket.CloseError
			if tc.wantErr == nil && (!errors.As(err, &ce) || ce.Code != websocket.CloseNormalClosure) {
				t.Fatalf("err = %v, want the normal close", err)
			}
			if err == io.EOF {
				t.Fatal("a close must not look like a clean EOF")
			}
		})
	}
}

package wsframe

import (
	"bytes"
	"testing"
)

func TestAppendServerHeader(t *testing.T) {
	for _, tt := range []struct {
		n    int
		want []byte
	}{
		{0, []byte{0x82, 0}},
		{125, []byte{0x82, 125}},
		{126, []byte{0x82, 126, 0, 126}},
		{65535, []byte{0x82, 126, 0xFF, 0xFF}},
		{65536, []byte{0x82, 127, 0, 0, 0, 0, 0, 1, 0, 0}},
		{65541, []byte{0x82, 127, 0, 0, 0, 0, 0, 1, 0, 5}},
	} {
		if got := AppendServerHeader(nil, tt.n); !bytes.Equal(got, tt.want) {
			t.Errorf("%d bytes: header %x, want %x", tt.n, got, tt.want)
		}
	}
}

package peerlimit

import (
	"testing"

	"github.com/wirekube/relay-ws/internal/contract"
)

func TestPeerLimits(t *testing.T) {
	type step struct {
		op   string // acquire, register, release
		idx  int    // ticket index for register/release
		want contract.Reason
	}
	tests := []struct {
		name              string
		maxSess, maxUnreg int
		steps             []step
	}{
		{"live session plus its replacement", 2, 1, []step{
			{"acquire", 0, ""}, {"register", 0, ""}, {"acquire", 1, ""},
			{"acquire", 2, contract.ReasonPeerSessionLimit},
		}},
		{"second unregistered refused", 2, 1, []step{
			{"acquire", 0, ""}, {"acquire", 1, contract.ReasonPeerUnregisteredLimit},
			{"register", 0, ""}, {"acquire", 1, ""},
		}},
		{"release frees both bounds", 2, 1, []step{
			{"acquire", 0, ""}, {"release", 0, ""}, {"acquire", 1, ""}, {"register", 1, ""},
			{"acquire", 2, ""}, {"acquire", 3, contract.ReasonPeerSessionLimit},
			{"release", 1, ""}, {"acquire", 3, contract.ReasonPeerUnregisteredLimit},
		}},
		{"repeated register and release are no-ops", 1, 1, []step{
			{"acquire", 0, ""}, {"register", 0, ""}, {"register", 0, ""}, {"release", 0, ""}, {"release", 0, ""},
			{"acquire", 1, ""},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := New(tc.maxSess, tc.maxUnreg)
			tickets := map[int]*Ticket{}
			for i, st := range tc.steps {
				switch st.op {
				case "acquire":
					tk, reason := l.Acquire("node-a")
					if reason != st.want {
						t.Fatalf("step %d: acquire = %q, want %q", i, reason, st.want)
					}
					if tk != nil {
						tickets[st.idx] = tk
					}
				case "register":
					tickets[st.idx].MarkRegistered()
				case "release":
					tickets[st.idx].Release()
				}
			}
			if other, r := l.Acquire("node-b"); r != "" {
				t.Fatalf("another peer refused: %s", r)
			} else {
				other.Release()
			}
			for _, tk := range tickets {
				tk.Release()
			}
			if l.Len() != 0 {
				t.Fatalf("%d peers left after every release", l.Len())
			}
		})
	}
}

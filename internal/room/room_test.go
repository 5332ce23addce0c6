package room

import (
	"testing"
)

func TestShare(t *testing.T) {
	for _, c := range []struct {
		name string
		r    Room
		want float64
	}{
		{"mark off", Room{Sessions: 99, FullAt: 0, Max: 100}, 0},
		{"below the mark", Room{Sessions: 94, FullAt: 95, Max: 100}, 0},
		{"at the mark", Room{Sessions: 95, FullAt: 95, Max: 100}, 1.0 / 6},
		{"half way", Room{Sessions: 97, FullAt: 95, Max: 100}, 3.0 / 6},
		{"one below max", Room{Sessions: 99, FullAt: 95, Max: 100}, 5.0 / 6},
		{"at max", Room{Sessions: 100, FullAt: 95, Max: 100}, 1},
		{"past max", Room{Sessions: 120, FullAt: 95, Max: 100}, 1},
		{"mark at max", Room{Sessions: 100, FullAt: 100, Max: 100}, 1},
		{"no max", Room{Sessions: 5, FullAt: 1, Max: 0}, 0},
	} {
		if got := c.r.Share(); got != c.want {
			t.Errorf("%s: Share() = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestFull(t *testing.T) {
	if (Room{Sessions: 99, FullAt: 95, Max: 100}).Full() {
		t.Error("99 of 100 reported full")
	}
	if !(Room{Sessions: 100, FullAt: 95, Max: 100}).Full() {
		t.Error("100 of 100 not reported full")
	}
}

func TestBounces(t *testing.T) {
	for _, c := range []struct {
		name  string
		r     Room
		draw  float64
		want  bool
		draws int
	}{
		{"below the mark: no draw", Room{Sessions: 94, FullAt: 95, Max: 100}, 0, false, 0},
		{"at the mark, draw under 1/6", Room{Sessions: 95, FullAt: 95, Max: 100}, 0.1, true, 1},
		{"at the mark, draw over 1/6", Room{Sessions: 95, FullAt: 95, Max: 100}, 0.2, false, 1},
		{"at max: refused, not bounced", Room{Sessions: 100, FullAt: 95, Max: 100}, 0, false, 0},
		{"draining: refused, not bounced", Room{Sessions: 97, FullAt: 95, Max: 100, Draining: true}, 0, false, 0},
		{"mark off", Room{Sessions: 99, Max: 100}, 0, false, 0},
	} {
		draws := 0
		got := c.r.Bounces(func() float64 { draws++; return c.draw })
		if got != c.want || draws != c.draws {
			t.Errorf("%s: Bounces = %v after %d draws, want %v after %d", c.name, got, draws, c.want, c.draws)
		}
	}
}

func TestParse(t *testing.T) {
	r, err := Parse([]byte(`{"sessions":9000,"full_at":8930,"max_sessions":9400,"draining":false,"later":1}`))
	if err != nil || r != (Room{Sessions: 9000, FullAt: 8930, Max: 9400}) {
		t.Fatalf("Parse = %+v, %v", r, err)
	}
	for _, bad := range []string{``, `[]`, `{"sessions":-1}`, `{"sessions":"1"}`, `{` + string(make([]byte, MaxBody)) + `}`} {
		if _, err := Parse([]byte(bad)); err == nil {
			t.Errorf("Parse(%.20q) accepted", bad)
		}
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"sessions":1,"full_at":2,"max_sessions":3}`))
	f.Add([]byte(`{"sessions":1e3}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := Parse(b)
		if err != nil {
			return
		}
		if s := r.Share(); s < 0 || s > 1 {
			t.Fatalf("Share %v out of [0,1] for %+v", s, r)
		}
	})
}

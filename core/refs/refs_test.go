package refs_test

import (
	"errors"
	"testing"
	"time"

	"github.com/swarmops/swarmops/core/objects"
	"github.com/swarmops/swarmops/core/refs"
)

func TestValidateName(t *testing.T) {
	good := []string{"main", "release/agent-7", "a.b/c_d", "x-"}
	bad := []string{"", "-x", "x/", "/x", "a//b", "a..b", "a b", "a\x00b", "a\tb", "x.lock", "a/.hidden", "a@{1}", "a~1", "a^", "a:b", "a?", "a*", "a[", "a\\b", "x.", string(make([]byte, 300))}
	for _, n := range good {
		if err := refs.ValidateName(n); err != nil {
			t.Errorf("ValidateName(%q) = %v, want nil", n, err)
		}
	}
	for _, n := range bad {
		if err := refs.ValidateName(n); !errors.Is(err, refs.ErrInvalidName) {
			t.Errorf("ValidateName(%q) = %v, want ErrInvalidName", n, err)
		}
	}
}

func TestTableAnswersAsOfASequence(t *testing.T) {
	tb := refs.New()
	a, b := objects.ID{1}, objects.ID{2}
	now := time.Unix(0, 0)
	tb.Apply(3, now, refs.Origin{Op: refs.OpRefSet}, []refs.Move{{Name: "main", New: a}})
	tb.Apply(7, now, refs.Origin{Op: refs.OpRefSet}, []refs.Move{{Name: "main", Old: a, New: b}})
	tb.Apply(9, now, refs.Origin{Op: refs.OpRefSet}, []refs.Move{{Name: "main", Old: b}})
	for seq, want := range map[uint64]objects.ID{2: {}, 3: a, 6: a, 7: b, 8: b, 9: {}} {
		if got := tb.Get("main", seq); got != want {
			t.Errorf("Get(main, %d) = %v, want %v", seq, got, want)
		}
	}
	if n := len(tb.Log("main", 7)); n != 2 {
		t.Errorf("Log up to 7 has %d entries, want 2", n)
	}
	var c *refs.Conflict
	if err := tb.Check([]refs.Move{{Name: "main", Old: a, New: b}}); !errors.As(err, &c) || !c.Current.IsZero() {
		t.Errorf("Check against a deleted ref: %v", err)
	}
	if err := tb.Check([]refs.Move{{Name: "x", New: a}, {Name: "x", New: b}}); err == nil {
		t.Error("Check accepted a ref moved twice in one transaction")
	}
}

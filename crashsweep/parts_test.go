package crashsweep

import (
	"context"
	"strings"
	"testing"
)

// TestEveryPartHoldsAndCatchesItsCanary runs each in-process part on the
// correct code, where every claim must hold, and with each canary that
// names it, which must produce a violation; then it replays the first such
// violation alone with PartConfig.At.
func TestEveryPartHoldsAndCatchesItsCanary(t *testing.T) {
	ctx := context.Background()
	for _, p := range Parts {
		t.Run(p.Name, func(t *testing.T) {
			rep, err := p.Run(ctx, PartConfig{})
			if err != nil {
				t.Fatal(err)
			}
			if rep.Skipped != "" {
				t.Skip(rep.Skipped)
			}
			t.Logf("%d points, %d states in %v", rep.Points, rep.States, rep.Elapsed)
			if rep.Points == 0 || rep.States == 0 {
				t.Fatal("the part checked nothing")
			}
			for _, v := range rep.Violations {
				t.Errorf("%s: %s\n    reproduce: go run ./cmd/crashsim %s", v.Claim, v.Detail, strings.Join(v.Args(), " "))
			}
			caught := 0
			for _, c := range Canaries {
				if c.Part != p.Name {
					continue
				}
				rep, err := p.Run(ctx, PartConfig{Weaken: c.Weaken, StopAtFirst: true})
				if err != nil {
					t.Fatal(err)
				}
				if len(rep.Violations) == 0 {
					t.Fatalf("canary %s: %d points, %d states checked and no violation", c.Name, rep.Points, rep.States)
				}
				caught++
				v := rep.Violations[0]
				if v.At < 0 {
					continue
				}
				again, err := p.Run(ctx, PartConfig{Weaken: c.Weaken, At: v.At, StopAtFirst: true})
				if err != nil {
					t.Fatal(err)
				}
				if len(again.Violations) == 0 || again.Violations[0].Detail != v.Detail {
					t.Fatalf("canary %s: --at %d found %v, want %q", c.Name, v.At, again.Violations, v.Detail)
				}
			}
			if caught == 0 {
				t.Fatalf("no canary names the part %s", p.Name)
			}
		})
	}
}

package crashsweep

import (
	"testing"
)

func TestGenCountsPrint(t *testing.T) {
	for _, a := range []int{1, 2, 3} {
		for d := 1; d <= 3; d++ {
			ws, st, err := Enumerate(d, a)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("agents %d depth %d: %d kept %+v", a, d, len(ws), st)
		}
	}
	ws, _, _ := Enumerate(2, 2)
	for _, w := range ws[:40] {
		y, err := w.YAML()
		if err != nil {
			t.Fatal(err)
		}
		_ = y
	}
	y, _ := ws[len(ws)-1].YAML()
	t.Logf("%s", y)
}

func TestGenRefsPrint(t *testing.T) {
	scs, _, err := Generated(3, 2)
	if err != nil {
		t.Fatal(err)
	}
	bad := 0
	for _, sc := range scs {
		ref, err := safeReference(sc, 0)
		if err != nil {
			bad++
			if bad < 15 {
				y, _ := ParseWorkload(sc.Name)
				yy, _ := y.YAML()
				t.Logf("%s: %v\n%s", sc.Name, err, yy)
			}
			continue
		}
		_ = ref
	}
	t.Logf("%d of %d failed", bad, len(scs))
}

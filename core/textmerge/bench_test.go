package textmerge

import (
	"fmt"
	"testing"
)

// codeLike is an n-line text shaped like source code: mostly distinct
// lines, with the braces and blank lines that recur in real files.
func codeLike(n int) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		switch i % 10 {
		case 0:
			out[i] = []byte(fmt.Sprintf("func f%d(x int) int {\n", i))
		case 8:
			out[i] = []byte("}\n")
		case 9:
			out[i] = []byte("\n")
		default:
			out[i] = []byte(fmt.Sprintf("\tx = x*%d + %d // step %d\n", i%7+2, i, i))
		}
	}
	return out
}

// benchTriple is a 5,000-line base with 50 edits on each side, in
// different places: ours rewrites a line in every hundred, theirs inserts
// two lines half way between, and each side appends at the end.
func benchTriple() (base, ours, theirs []byte) {
	b := codeLike(5000)
	var o, th [][]byte
	for i, l := range b {
		if i%100 == 3 {
			o = append(o, []byte(fmt.Sprintf("\tx = ours(x, %d)\n", i)))
		} else {
			o = append(o, l)
		}
		th = append(th, l)
		if i%100 == 53 {
			th = append(th, []byte(fmt.Sprintf("\tlog(%d)\n", i)), []byte("\ty := x\n"))
		}
	}
	o = append(o, []byte("// ours\n"))
	th = append([][]byte{[]byte("// theirs\n")}, th...)
	return join(b), join(o), join(th)
}

func BenchmarkMerge(b *testing.B) {
	base, ours, theirs := benchTriple()
	res, err := Merge(base, ours, theirs, gitLabels)
	if err != nil || !res.Clean {
		b.Fatalf("the benchmark's edits must merge cleanly: err %v, %d conflicts", err, len(res.Conflicts))
	}
	b.Run("lines=5000", func(b *testing.B) {
		b.SetBytes(int64(len(base)))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := Merge(base, ours, theirs, gitLabels); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkUnified(b *testing.B) {
	base, ours, _ := benchTriple()
	b.Run("lines=5000", func(b *testing.B) {
		b.SetBytes(int64(len(base)))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := Unified(base, ours, DefaultContext); err != nil {
				b.Fatal(err)
			}
		}
	})
}

//go:build lockorder && !amd64 && !arm64

package lockorder

import (
	"bytes"
	"runtime"
	"strconv"
)

// gid identifies the calling goroutine: its id, from its stack header
// ("goroutine 123 [running]:").
func gid() int64 {
	var buf [64]byte
	b := buf[:runtime.Stack(buf[:], false)]
	b = bytes.TrimPrefix(b, []byte("goroutine "))
	if i := bytes.IndexByte(b, ' '); i > 0 {
		b = b[:i]
	}
	n, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil {
		panic("lockorder: cannot read the goroutine id: " + err.Error())
	}
	return n
}
